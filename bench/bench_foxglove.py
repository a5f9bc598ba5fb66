"""The Foxglove server's cost per monitor frame: the process's CPU time per
frame with the server on and one real client subscribed to every channel
(Foxglove's own client library on Node, as test_foxglove_stack.py drives
it), against the same frames with the server off, in one run.

Each frame does what the Foxglove node does for one monitor frame, through
its :class:`StackView`: a serialized VerdictArray of N instances handed to
the server's queue, then decoded, turned into the verdict message and sent
on the server's thread; and five TF messages of 30 transforms (a robot's
100 Hz TF) relayed as each link's newest pose, with the arm drawn from them.  The CPU time counts every thread of this
process (the SDK's own included); the client's process is not counted.

    python bench/bench_foxglove.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rclpy.serialization import serialize_message  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from safemanip_ros.foxglove.server import Address, FoxgloveServer  # noqa: E402
from safemanip_ros.foxglove.view import StackView  # noqa: E402
from safemanip_ros.grounding.config import load_robot_config  # noqa: E402
from safemanip_ros.msg import Verdict, VerdictArray  # noqa: E402

CLIENT = REPO / 'test' / 'helpers' / 'foxglove_client.cjs'
ROBOT = REPO / 'config' / 'robots' / 'panda_demo.yaml'
MODULES = Path(sys.executable).parent.parent / 'foxglove-client' / 'node_modules'
RATE_HZ = 50.0
TF_PER_FRAME = 5


def _messages(instances: int) -> tuple[bytes, bytes]:
    """A VerdictArray of ``instances``, and a TF message of 30 transforms: the demo robot's arm as a chain
    of links (drawn by the view's robot figure), the rest children of the world."""
    arr = VerdictArray(episode_id='bench', frame=1, verdicts=[
        Verdict(property=f'p{k}', instance=f'p{k}[object=o{k % 5}]', frame=1, verdict=3, mode=0,
                recovery_verdict=2) for k in range(instances)])
    tf = TFMessage()
    from geometry_msgs.msg import TransformStamped
    robot = load_robot_config(ROBOT)
    chain = sorted(robot.contacts.robot_bodies) + [robot.tf.gripper_frame]
    parents = ['world', *chain]
    for k in range(30):
        t = TransformStamped()
        t.header.frame_id, t.child_frame_id = (parents[k], chain[k]) if k < len(chain) else ('world', f'link{k}')
        t.transform.translation.z = 0.1
        t.transform.rotation.w = 1.0
        tf.transforms.append(t)
    return serialize_message(arr), serialize_message(tf)


def _frames(server: FoxgloveServer | None, verdicts_raw: bytes, tf_raw: bytes, frames: int) -> float:
    """CPU seconds per frame of this process over ``frames`` frames at RATE_HZ, each handed to the server
    as the Foxglove node hands it (its StackView, the demo robot's: markers and the arm drawn)."""
    view = StackView.of_robot(load_robot_config(ROBOT))
    t0_cpu, t0 = time.process_time(), time.monotonic()
    for k in range(frames):
        time.sleep(max(0.0, t0 + k / RATE_HZ - time.monotonic()))
        if server is not None:
            for _ in range(TF_PER_FRAME):
                view.tf.add(tf_raw)
            server.offer(lambda: view.take('verdicts', verdicts_raw))
            now_ns = time.time_ns()
            server.offer(lambda: view.transforms(now_ns))
    if server is not None:
        while server.queued:
            time.sleep(0.001)
    return (time.process_time() - t0_cpu) / frames


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument('--quick', action='store_true')
    args = ap.parse_args()
    frames = 50 if args.quick else 500
    if not (MODULES / '@foxglove' / 'ws-protocol').is_dir():
        print(f'bench_foxglove: the Foxglove client is not installed in {MODULES} (make setup)', file=sys.stderr)
        return 1
    print('\n## Foxglove server: CPU per monitor frame (this process, all threads), one client subscribed')
    print(f'{"instances":>10} {"server off":>12} {"server on":>12} {"extra":>10} {"share of a 20 Hz core":>22}')
    failed = False
    for instances in (15, 200):
        verdicts_raw, tf_raw = _messages(instances)
        off = _frames(None, verdicts_raw, tf_raw, frames)
        server = FoxgloveServer(Address('127.0.0.1', 0))
        client = subprocess.Popen(['node', str(CLIENT), str(server.address)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                  env={**os.environ, 'NODE_PATH': str(MODULES)})
        try:
            assert client.stdout is not None
            for line in client.stdout:           # subscribed once the channels are advertised
                if json.loads(line)['kind'] == 'channels':
                    break
            time.sleep(0.2)
            on = _frames(server, verdicts_raw, tf_raw, frames)
            sent, dropped, errors = server.sent, server.dropped, server.errors
        finally:
            client.kill()
            client.wait()
            server.stop()
        extra = on - off
        print(f'{instances:>10} {off * 1e6:>10.0f}us {on * 1e6:>10.0f}us {extra * 1e6:>8.0f}us '
              f'{extra * 20 * 100:>21.1f}%   ({sent} messages sent, {dropped} dropped, {errors} errors)')
        if errors:          # a message the server could not make or send: the figures measure a failure
            print(f'bench_foxglove: {errors} messages failed: {server.last_error}', file=sys.stderr)
            failed = True
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
