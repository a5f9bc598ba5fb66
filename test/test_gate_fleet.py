"""A fleet gated live over DDS with real monitors: two namespaced ``monitor``
processes (robots ``r1`` and ``r2``) fed predicates, their rollouts ended
through ``~/end_episode``, and one ``gate --live --robot r1 --robot r2``
that counts each robot's final metrics and fails the robot that violates."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO
from ros_helpers import ros_node, spin_until
from std_srvs.srv import Trigger

from safemanip_ros.msg import GateDecision, PredicateArray, VerdictArray
from safemanip_ros.nodes.conversions import predicate_array
from safemanip_ros.nodes.qos import RELIABLE, latched

pytestmark = pytest.mark.ros
ROBOTS = ('r1', 'r2')


def _monitor(robot: str, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [str(Path(sys.executable).parent / 'monitor'), '--ros-args', '-r', f'__ns:=/{robot}',
         '-p', f'properties:=[{REPO / "config" / "properties" / "safemanip.yaml"}]',
         '-p', f'scene:={REPO / "config" / "scenes" / "kitchen_demo.yaml"}',
         '-p', 'only:=[reach_in_fixture_only_when_fully_open]', '-p', 'autostart:=true'],
        stdout=open(log, 'w'), stderr=subprocess.STDOUT)


def test_a_fleet_of_real_monitors_is_gated_per_robot(tmp_path):
    procs = [_monitor(r, tmp_path / f'{r}.log') for r in ROBOTS]
    gate = subprocess.Popen([sys.executable, '-m', 'safemanip_ros.cli.main', 'gate', '--live', '--robot', 'r1',
                             '--robot', 'r2', '--max-rate', 'enclosure_access=0.3', '--unit', 'rollout',
                             '--state', str(tmp_path / 'state.json')],
                            stdout=open(tmp_path / 'gate.log', 'w'), stderr=subprocess.STDOUT)
    procs.append(gate)
    try:
        with ros_node('fleet_harness') as (node, ex):
            pubs = {r: node.create_publisher(PredicateArray, f'/{r}/predicates', RELIABLE) for r in ROBOTS}
            ends = {r: node.create_client(Trigger, f'/{r}/monitor/end_episode') for r in ROBOTS}
            starts = {r: node.create_client(Trigger, f'/{r}/monitor/start_episode') for r in ROBOTS}
            frames_seen = {r: 0 for r in ROBOTS}
            for r in ROBOTS:
                node.create_subscription(VerdictArray, f'/{r}/verdicts',
                                         lambda m, r=r: frames_seen.__setitem__(r, frames_seen[r] + 1), RELIABLE)
            decisions: dict[tuple[str, str], GateDecision] = {}
            node.create_subscription(GateDecision, 'gate/decisions',
                                     lambda m: decisions.__setitem__((m.robot, m.name), m), latched(256))

            def wait(cond, timeout_s=60.0, publish=None) -> bool:
                return spin_until(ex, cond, timeout_s, each=publish)

            def call(client) -> Trigger.Response:
                assert client.wait_for_service(timeout_sec=60), client.srv_name
                future = client.call_async(Trigger.Request())
                assert wait(future.done), client.srv_name
                return future.result()

            # Up, and discovered by each other: each robot's final metrics have their monitor's publisher and
            # the gate's subscription (a gate that had not yet matched r1's monitor counted r2's rollouts alone).
            assert wait(lambda: all(c.service_is_ready() for c in ends.values()) and
                        all(p.get_subscription_count() > 0 for p in pubs.values()) and
                        all(node.count_publishers(f'/{r}/metrics/final') > 0 and
                            node.count_subscribers(f'/{r}/metrics/final') > 0 for r in ROBOTS) and
                        decisions.get(('', 'enclosure_access')) is not None, 120)

            def rollout(robot: str, door_open: bool) -> None:
                """The gripper reaches into the microwave, its door fully open or not; then the rollout ends."""
                frame = {'reach_in_microwave': True, 'fixture_fully_open_microwave': door_open,
                         'reach_in_cabinet': False, 'fixture_fully_open_cabinet': False}
                before = frames_seen[robot]
                assert wait(lambda: frames_seen[robot] >= before + 5, 60,
                            lambda: pubs[robot].publish(predicate_array(frame, time.time_ns(), 'harness')))
                assert call(ends[robot]).success
                assert call(starts[robot]).success
                pubs[robot].publish(predicate_array({k: False for k in frame}, time.time_ns(), 'harness'))

            for _ in range(4):                 # 0.3 limit, alpha 0.05: four violating rollouts fail it
                for robot in ROBOTS:
                    if gate.poll() is None:
                        rollout(robot, door_open=(robot == 'r1'))
            assert wait(lambda: gate.poll() is not None, 60)
            assert gate.returncode == 1, (tmp_path / 'gate.log').read_text()
            assert wait(lambda: ('r2', 'enclosure_access') in decisions and
                        decisions[('r2', 'enclosure_access')].decision == GateDecision.FAIL, 30)
            r1, r2 = decisions[('r1', 'enclosure_access')], decisions[('r2', 'enclosure_access')]
            assert (r2.rollouts, r2.violations, r2.decided_after) == (4, 4, 4)
            assert r1.decision == GateDecision.UNDECIDED and r1.violations == 0 and r1.rollouts >= 3
            log = (tmp_path / 'gate.log').read_text()
            assert 'gate: FAIL' in log and 'enclosure_access (r2)' in log and 'FAIL: enclosure_access (r1)' not in log, log
            state = json.loads((tmp_path / 'state.json').read_text())
            rollouts = [e for _, e in state['seen']]
            assert len(rollouts) == len(set(rollouts)) == r1.rollouts + r2.rollouts
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
