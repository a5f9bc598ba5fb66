"""``safemanip demo`` (physics): robosuite Lift rollouts, clean and faulty,
watched live over DDS by the whole stack, then audited.

For each rollout two processes run side by side, as on a robot:

* ``sim_bridge`` steps the simulated Panda in real time and publishes
  ``/clock``, ``joint_states``, ``/tf``, ``/tf_static`` and ``contacts``
  (one ``sim_bridge --serve`` process for the whole run, each rollout in a
  new world and a ROS context of its own: robosuite is imported once);
* ``safemanip run --config config/robots/robosuite_lift.yaml`` (grounding,
  monitor, supervisor, recorder; ``use_sim_time``), started anew for each
  rollout, monitors it, pauses the simulated arm on a violation whose
  response is a pause, and records the rollout's bag.

The bridge writes the rollout's physical ground truth (and the holds it
obeyed) into the bag folder.  After the last rollout the bags are audited
(``safemanip audit``) and a table compares, per rollout, the labelled
fault with the violations the live monitor raised, their latency, and the
supervisor's hold.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..errors import SafemanipError
from ..resources import config_path
from ..sim import ROBOT_CONFIGS
from .options import writable_folder

DEMO_ROLLOUTS = [('Lift', 'none', 1), ('Lift', 'midair_drop', 2), ('Lift', 'drag', 3), ('Lift', 'table_smash', 4),
                 ('Lift', 'release_above_support', 5), ('PickPlace', 'none', 6),
                 ('PickPlace', 'touch_raw_then_clean', 7), ('Lift', 'none', 8)]
RATE_HZ = 20.0
CAMERA_FAILSAFE_STALENESS_S = 3.0
"""The supervisor's sensor fail-safe with ``--perception camera`` (s, wall clock; the default is 0.5 s)."""


def register_options(p: argparse.ArgumentParser) -> None:
    p.add_argument('--out', metavar='DIR', help='bags, logs and the audit report (default: demo_output/<time>)')
    # --episodes, --episode-timeout-s: the names before rollout became the one word for a run.
    p.add_argument('--rollouts', '--episodes', dest='rollouts', type=int, default=len(DEMO_ROLLOUTS),
                   help=f'how many of the demo rollouts to run (default {len(DEMO_ROLLOUTS)})')
    p.add_argument('--rollout-timeout-s', '--episode-timeout-s', dest='rollout_timeout_s', type=float, default=120.0,
                   help='give up on a rollout that has not finished after this long (default 120 s)')
    p.add_argument('--perception', default='truth', choices=['truth', 'realistic', 'double', 'camera'],
                   help="object poses as the simulator knows them (truth), as a camera tracker "
                        "publishes them: noisy, 10 Hz, late, some missed (realistic; double: twice the "
                        "noise and misses), or found in the pixels of a rendered RGB-D camera (camera: "
                        "Lift rollouts only)")
    p.add_argument('--canary', action='store_true',
                   help='two canaries instead: a good policy and one that drops the cube, each gated live by '
                        '`gate --live` (PASS / FAIL as early as the evidence allows), then checked against '
                        '`gate --sequential` on their recorded bags')


def _say(text: str) -> None:
    print(text, flush=True)


def _exe(name: str) -> list[str]:
    """The command line of one of our executables: the installed console
    script beside this interpreter, else the module it runs."""
    script = Path(sys.executable).parent / name
    if script.exists():
        return [str(script)]
    module = {'safemanip': 'safemanip_ros.cli.main', 'sim_bridge': 'safemanip_ros.nodes.sim_bridge'}[name]
    return [sys.executable, '-c', f'import sys; from {module} import main; sys.exit(main())']


class SimServer:
    """A ``sim_bridge --serve`` process (its own output to ``log``): one
    rollout at a time, robosuite loaded once for all of them."""

    def __init__(self, env: dict[str, Any], log: Path) -> None:
        self._log = open(log, 'w')
        self.proc = subprocess.Popen(_exe('sim_bridge') + ['--serve'], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._log, env=env, text=True,
                                     start_new_session=True)
        self.log = log

    def start(self, ros_args: list[str], log: Path) -> None:
        """Begin a rollout: ``sim_bridge``'s ROS arguments, its output to ``log``."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps({'ros_args': ros_args, 'log': str(log)}) + '\n')
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise SafemanipError(f'sim_bridge --serve exited ({self.proc.poll()}); log: {self.log}') from None

    def finished(self, wait_s: float) -> int | None:
        """The rollout's exit code once it has ended, else None after up to ``wait_s``."""
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], wait_s)
        if not ready:
            return None
        line = self.proc.stdout.readline()
        if not line:
            raise SafemanipError(f'sim_bridge --serve exited ({self.proc.wait()}); log: {self.log}')
        return int(json.loads(line)['exit_code'])

    def close(self) -> None:
        """End the server: the end of its requests (an idle server exits at
        once); after 5 s SIGINT (it ends a rollout under way), after 30 s
        more SIGKILL."""
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGINT)
                try:
                    self.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait()
        self._log.close()

    def __enter__(self) -> 'SimServer':
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _run_rollout(sim: SimServer, task: str, fault: str, seed: int, bag: Path, log_dir: Path, timeout_s: float,
                 env: dict[str, Any], perception: str = 'truth', bridge_params: tuple[str, ...] = ()
                 ) -> dict[str, Any]:
    robot = config_path('robots', ROBOT_CONFIGS[task])
    truth_file = log_dir / f'{bag.name}.truth.json'
    stack_log = open(log_dir / f'{bag.name}.stack.log', 'w')
    bridge_log = log_dir / f'{bag.name}.bridge.log'
    # Rendering a camera makes the simulator slower than real time (a frame is about 64 ms of CPU): its
    # joint states then come further apart on the wall clock, which the supervisor's fail-safe judges them by
    # (as on a real arm), so the camera level gives them CAMERA_FAILSAFE_STALENESS_S.
    from ..sim.perception import LEVELS
    slow = ['-p', f'failsafe_staleness_s:={CAMERA_FAILSAFE_STALENESS_S}'] if LEVELS[perception].camera else []
    stack = subprocess.Popen(_exe('safemanip') + ['run', '--config', str(robot), '--bag', str(bag), '--no-camera',
                                                  '--reliable-inputs',
                                                  '--ros-args', '-p', 'use_sim_time:=true', *slow,
                                                  # The raw inputs beside the predicates: `config init --from-bag`,
                                                  # `doctor` and a replay work on the demo's bags.
                                                  '-p', 'record_raw_inputs:=true'],
                             stdout=stack_log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    t0 = time.monotonic()
    try:
        sim.start(['-p', f'task:={task}', '-p', f'fault:={fault}', '-p', f'seed:={seed}',
                   '-p', f'perception:={perception}', '-p', f'truth_file:={truth_file}',
                   '-p', 'wait_for_subscribers:=2', *[a for kv in bridge_params for a in ('-p', kv)]], bridge_log)
        while (code := sim.finished(0.2)) is None:
            if stack.poll() is not None:
                raise SafemanipError(f'the monitoring stack exited ({stack.returncode}); log: {stack_log.name}')
            if time.monotonic() - t0 > timeout_s:
                raise SafemanipError(f'rollout {bag.name} did not finish in {timeout_s:g} s; logs: {bridge_log}')
        if code != 0 or not truth_file.exists():
            raise SafemanipError(f'sim_bridge failed ({code}); log: {bridge_log}')
    finally:
        if stack.poll() is None:
            os.killpg(stack.pid, signal.SIGINT)
        try:
            stack.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(stack.pid, signal.SIGKILL)
        stack_log.close()
    truth: dict[str, Any] = json.loads(truth_file.read_text())
    if bag.is_dir():
        shutil.copy(truth_file, bag / 'truth.json')
    return truth


def _live_events(bag: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(violation openings, supervisor actions) recorded in the bag, sim-time stamps in seconds."""
    from ..bag import open_bag, typestore
    from ..stamps import stamp_s
    ts = typestore()
    violations, actions = [], []
    with open_bag(bag) as opened:      # read as repaired where a kill left splits unlisted
        conns = [c for c in opened.connections if c.topic in ('/violations', '/supervisor_actions')]
        for conn, _, raw in opened.messages(conns):
            msg = ts.deserialize_cdr(raw, conn.msgtype)
            if conn.topic == '/violations' and msg.event == 0:
                violations.append({'property': msg.property, 'instance': msg.instance,
                                   'time_s': stamp_s(msg.start_stamp)})
            elif conn.topic == '/supervisor_actions':
                actions.append({'action': int(msg.action), 'property': msg.property, 'success': bool(msg.success),
                                'time_s': stamp_s(msg.header.stamp)})
    return violations, actions


def run(args: argparse.Namespace) -> int:
    from ..sim.world import import_robosuite
    t_start = time.monotonic()
    import_robosuite()
    out = Path(args.out or Path('demo_output') / time.strftime('%Y%m%d-%H%M%S'))
    if out.exists() and any(out.iterdir()):
        raise SafemanipError(f'--out {out}: exists and is not empty; choose a new folder')
    (writable_folder('--out', out) / 'logs').mkdir(exist_ok=True)
    env = dict(os.environ)
    env.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    env.setdefault('ROS_DOMAIN_ID', str(random.randint(120, 229)))   # our own DDS domain unless the user chose one
    plan = DEMO_ROLLOUTS[:max(1, args.rollouts)]
    _say(f'safemanip demo: {len(plan)} robosuite rollouts (Lift and PickPlace with food; Panda, 20 Hz physics; '
         f'object poses: {args.perception}), each watched live over DDS '
         f'by grounding + monitor + supervisor, recorded to {out / "bags"} (ROS_DOMAIN_ID {env["ROS_DOMAIN_ID"]})')
    rows = []
    with SimServer(env, out / 'logs' / 'sim_bridge.log') as sim:
        for i, (task, fault, seed) in enumerate(plan):
            name = f'{task.lower()}_{fault}_{seed:03d}'
            bag = out / 'bags' / name
            t0 = time.monotonic()
            _say(f'[{i + 1}/{len(plan)}] {name}: simulating (about 15 s) ...')
            truth = _run_rollout(sim, task, fault, seed, bag, out / 'logs', args.rollout_timeout_s, env,
                                 args.perception)
            violations, actions = _live_events(bag)
            rows.append((name, truth, violations, actions))
            holds = [a for a in actions if a['action'] in (2, 3, 4) and a['success']]
            _say(f'    {truth["frames"]} frames; labelled {[e["event"] for e in truth["events"]] or "nothing"}; '
                 f'live violations {sorted({v["property"] for v in violations}) or "none"}; '
                 f'{len(holds)} hold(s) sent, {len(truth.get("supervisor_holds", []))} obeyed by the arm '
                 f'({time.monotonic() - t0:.0f} s)')
    _say('auditing the recorded bags ...')
    audit_lines, audit_rc = [], 0
    for task in sorted({t for t, _, _ in plan}):
        bags = [str(out / 'bags' / f'{t.lower()}_{f}_{sd:03d}') for t, f, sd in plan if t == task]
        proc = subprocess.run(_exe('safemanip') + ['audit', *bags, '--config', str(config_path('robots',
                                                                                             ROBOT_CONFIGS[task])),
                                                   '--out', str(out / 'audit' / task), '--quiet'],
                              capture_output=True, text=True)
        audit_lines.append(proc.stdout + proc.stderr)
        audit_rc |= proc.returncode
    audit = subprocess.CompletedProcess([], audit_rc, '\n'.join(audit_lines), '')
    (out / 'logs' / 'audit.log').write_text(audit.stdout + audit.stderr)
    _say('')
    table = []
    failures = 0
    for name, truth, violations, actions in rows:
        first = min((e['start_frame'] for e in truth['events']), default=None)
        t_event = None if first is None else first / RATE_HZ
        lat = []
        for prop in sorted({v['property'] for v in violations}):
            t = min(v['time_s'] for v in violations if v['property'] == prop)
            lat.append(f'{prop}' + ('' if t_event is None else f' ({round((t - t_event) * RATE_HZ):+d})'))
        holds = [a for a in actions if a['action'] in (2, 3, 4) and a['success']]
        hold = '-' if not holds else ('yes' if t_event is None else
                                      f'{round((holds[0]["time_s"] - t_event) * RATE_HZ):+d}')
        obeyed = 'yes' if truth.get('supervisor_holds') else '-'
        ok = bool(violations) == bool(truth['events'])
        failures += not ok
        table.append((name, ', '.join(e['event'] for e in truth['events']) or 'clean', '; '.join(lat) or 'none',
                      hold, obeyed, '' if ok else 'MISMATCH'))
    head = ('rollout', 'labelled fault', 'live violations (latency in frames)', 'hold', 'arm held', '')
    widths = [max(len(r[i]) for r in table + [head]) for i in range(len(head))]
    for r in [head] + table:
        _say('  '.join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    _say('')
    for task in sorted({t for t, _, _ in plan}):
        _say(f'report ({task}): {out / "audit" / task / "report.html"}')
    _say(f'({time.monotonic() - t_start:.0f} s in all; logs in {out / "logs"})')
    if failures:
        _say(f'{failures} rollout(s) where the live monitor and the labels disagree')
    return 0 if failures == 0 and audit.returncode == 0 else 1
