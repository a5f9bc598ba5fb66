"""``safemanip demo --canary``: two canaries, each gated live, as early as
the evidence allows.

Two candidate policies run the robosuite Lift task, each on a DDS domain of
its own as on a robot of its own (``ROS_DOMAIN_ID`` and the one after it
where it is set, else two at random): **good** (the scripted policy) and
**dropper** (the same policy, which drops the cube in mid-air: its fault
injection), side by side.  Every rollout is watched by the whole stack (``safemanip run``,
recording a bag), and the bridge ends it with the monitor's
``~/end_episode``, so the final metrics go out.  Each canary has its own
deployment gate, ``safemanip gate --live``, on the rollout violation rate of
the ``release_stability`` category (releases where nothing supports the
object) against a limit of 40 % (unit rollout, α = 0.05 for a wrong PASS
and for a wrong FAIL; the anytime-valid test of ``audit/sequential.py``,
which needs 8 clean rollouts to PASS and 5
violating ones in a row to FAIL at that limit).  A canary runs one rollout
after another and stops when its gate decides; its decisions also go to a
JSON-lines alert sink.

Afterwards each canary's bags are audited (``audit --max-rate``: report.html
shows the running bound against the limit) and ``gate --sequential`` on the
report must repeat the live gate's decision after the same number of
rollouts.  Exit 0 when the good canary passed, the dropper failed, and both
offline replays agree.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..audit.sequential import POOLED, CanaryGate
from ..errors import SafemanipError
from ..resources import config_path
from ..sim import ROBOT_CONFIGS
from .demo_physics import SimServer, _exe, _live_events, _run_rollout, _say
from .options import writable_folder

CANARIES = (('good', 'none'), ('dropper', 'midair_drop'))
LIMIT = ('release_stability', 0.4)
UNIT = 'rollout'
ALPHA = 0.05
MAX_ROLLOUTS = 12
"""The gate's budget: undecided (exit 4) after this many rollouts."""
GATE_EXIT = {0: 'PASS', 1: 'FAIL', 4: 'UNDECIDED'}


@dataclass
class Canary:
    name: str
    fault: str
    folder: Path
    env: dict[str, str]
    gate: subprocess.Popen[bytes] | None = None
    rollouts: int = 0
    violated: int = 0
    bags: list[Path] = field(default_factory=list)

    @property
    def state_file(self) -> Path:
        return self.folder / 'gate_state.json'

    def state(self) -> CanaryGate:
        """The live gate's persisted state (empty before the gate wrote it)."""
        try:
            return CanaryGate.from_json(json.loads(self.state_file.read_text()))
        except (OSError, ValueError, KeyError):
            return CanaryGate({LIMIT[0]: LIMIT[1]}, UNIT, ALPHA)

    def counted(self) -> int:
        """Rollouts the live gate has counted."""
        return len(self.state().seen)


def _start_gate(canary: Canary) -> None:
    alerts = canary.folder / 'alerts.yaml'
    alerts.write_text(f'alerts:\n  jsonl: {json.dumps(str(canary.folder / "alerts.jsonl"))}\n  min_interval_s: 0\n')
    log = canary.folder / 'logs' / 'gate.log'
    canary.gate = subprocess.Popen(
        _exe('safemanip') + ['gate', '--live', '--max-rate', f'{LIMIT[0]}={LIMIT[1]}', '--unit', UNIT,
                             '--alpha', str(ALPHA), '--state', str(canary.state_file),
                             '--max-rollouts', str(MAX_ROLLOUTS), '--alerts', str(alerts)],
        stdout=open(log, 'w'), stderr=subprocess.STDOUT, env=canary.env, start_new_session=True)
    end = time.monotonic() + 60.0
    while 'gate: watching' not in log.read_text():
        if canary.gate.poll() is not None or time.monotonic() > end:
            raise SafemanipError(f'the gate of canary {canary.name} did not start; log: {log}')
        time.sleep(0.2)


def _wait_counted(canary: Canary, timeout_s: float = 30.0) -> None:
    """Until the live gate has counted every rollout run (or has exited, decided)."""
    assert canary.gate is not None
    end = time.monotonic() + timeout_s
    while canary.counted() < canary.rollouts:
        if canary.gate.poll() is not None and canary.counted() < canary.rollouts:
            raise SafemanipError(f'the gate of canary {canary.name} exited ({canary.gate.returncode}) before it '
                                 f'counted rollout {canary.rollouts}; log: {canary.folder / "logs" / "gate.log"}')
        if time.monotonic() > end:
            raise SafemanipError(f'the gate of canary {canary.name} did not count rollout {canary.rollouts} in '
                                 f'{timeout_s:g} s (final metrics lost?); log: {canary.folder / "logs" / "gate.log"}')
        time.sleep(0.1)


def _offline(canary: Canary) -> tuple[str, int | None, str]:
    """(decision, after rollouts, what failed) of ``gate --sequential`` on the audit of the canary's bags."""
    out = canary.folder / 'audit'
    robot = str(config_path('robots', ROBOT_CONFIGS['Lift']))
    proc = subprocess.run(_exe('safemanip') + ['audit', *map(str, canary.bags), '--config', robot, '--out', str(out),
                                               '--quiet', '--max-rate', f'{LIMIT[0]}={LIMIT[1]}', '--unit', UNIT,
                                               '--alpha', str(ALPHA)], capture_output=True, text=True)
    (canary.folder / 'logs' / 'audit.log').write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        return 'ERROR', None, f'audit exited {proc.returncode}'
    gate = subprocess.run(_exe('safemanip') + ['gate', str(out / 'report.json'), '--sequential', '--unit', UNIT,
                                               '--alpha', str(ALPHA), '--max-rate', f'{LIMIT[0]}={LIMIT[1]}'],
                          capture_output=True, text=True)
    (canary.folder / 'logs' / 'gate_sequential.log').write_text(gate.stdout + gate.stderr)
    row = json.loads((out / 'report.json').read_text())['sequential']['limits'][0]
    return GATE_EXIT.get(gate.returncode, f'exit {gate.returncode}'), row['after_rollouts'], ''


def _roll_out(canary: Canary, args: argparse.Namespace) -> None:
    """A canary's rollouts, one after another, until its live gate decides
    (exits) or its budget of rollouts is spent."""
    assert canary.gate is not None
    with SimServer(canary.env, canary.folder / 'logs' / 'sim_bridge.log') as sim:
        for k in range(MAX_ROLLOUTS):
            if canary.gate.poll() is not None:
                return
            seed = 100 + k
            bag = canary.folder / 'bags' / f'{k:03d}_lift_{canary.fault}_{seed:03d}'
            t0 = time.monotonic()
            truth = _run_rollout(sim, 'Lift', canary.fault, seed, bag, canary.folder / 'logs', args.rollout_timeout_s,
                                 canary.env, args.perception,
                                 bridge_params=('end_episode_service:=/monitor/end_episode',))
            violations, _ = _live_events(bag)
            canary.bags.append(bag)
            canary.rollouts += 1
            hit = sorted({v['property'] for v in violations})
            canary.violated += bool(hit)
            _wait_counted(canary)
            s = canary.state().stream(POOLED, LIMIT[0])
            _say(f'[{canary.name} {canary.rollouts}] {truth["frames"]} frames, labelled '
                 f'{[e["event"] for e in truth["events"]] or "nothing"}; live violations {hit or "none"}; gate: '
                 f'{s.decision or "undecided"} ({s.violations} of {s.observations} '
                 f'rollouts violated {LIMIT[0]}) ({time.monotonic() - t0:.0f} s)')
            if s.decision:       # decided: its state says so before the gate process has exited
                return


MAX_DOMAIN_ID = 232
"""The largest ROS_DOMAIN_ID DDS maps to ports on Linux."""


def canary_domains(given: str | None, count: int) -> list[int]:
    """A DDS domain per canary: from ``ROS_DOMAIN_ID`` on where the user set
    it (that one and the next ones), else free-looking ones at random.

    Raises:
        SafemanipError: ``ROS_DOMAIN_ID`` not an integer in 0..232-count+1.
    """
    if given is None or not given.strip():
        return random.sample(range(120, 230), count)
    try:
        first = int(given)
    except ValueError:
        first = -1
    if not 0 <= first <= MAX_DOMAIN_ID - count + 1:
        raise SafemanipError(f'ROS_DOMAIN_ID={given!r}: the canaries need {count} domains from it, within '
                             f'0..{MAX_DOMAIN_ID}')
    return list(range(first, first + count))


def run(args: argparse.Namespace) -> int:
    from ..sim.world import import_robosuite
    t_start = time.monotonic()
    import_robosuite()
    out = Path(args.out or Path('demo_output') / time.strftime('canary-%Y%m%d-%H%M%S'))
    if out.exists() and any(out.iterdir()):
        raise SafemanipError(f'--out {out}: exists and is not empty; choose a new folder')
    writable_folder('--out', out)
    domains = canary_domains(os.environ.get('ROS_DOMAIN_ID'), len(CANARIES))
    canaries = []
    for (name, fault), domain in zip(CANARIES, domains):
        env = dict(os.environ, ROS_DOMAIN_ID=str(domain))   # a domain each: two robots that never meet
        env.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
        canary = Canary(name, fault, out / name, env)
        (canary.folder / 'logs').mkdir(parents=True)
        canaries.append(canary)
    _say(f'safemanip demo --canary: canaries {", ".join(f"{c.name} (fault: {c.fault}, ROS_DOMAIN_ID {d})" for c, d in zip(canaries, domains))} on '
         f'robosuite Lift, each gated live: rollout violation rate of {LIMIT[0]} <= {LIMIT[1]:g}, unit {UNIT}, '
         f'alpha {ALPHA:g} (at most {MAX_ROLLOUTS} rollouts each); output in {out}')
    try:
        for canary in canaries:
            _start_gate(canary)
        # The canaries are robots of their own (a DDS domain each): their rollouts run side by side.
        with ThreadPoolExecutor(len(canaries)) as pool:
            for done in [pool.submit(_roll_out, canary, args) for canary in canaries]:
                done.result()
        for canary in canaries:
            assert canary.gate is not None
            try:
                canary.gate.wait(timeout=30)
            except subprocess.TimeoutExpired:
                raise SafemanipError(f'the gate of canary {canary.name} did not exit after its budget') from None
    finally:
        for canary in canaries:
            if canary.gate is not None and canary.gate.poll() is None:
                os.killpg(canary.gate.pid, signal.SIGINT)
                canary.gate.wait(timeout=30)
    _say('auditing each canary\'s bags and replaying its gate (gate --sequential) ...')
    rows, ok = [], True
    for canary, want in zip(canaries, ('PASS', 'FAIL')):
        assert canary.gate is not None
        live = GATE_EXIT.get(canary.gate.returncode, f'exit {canary.gate.returncode}')
        after = canary.state().stream(POOLED, LIMIT[0]).decided_after
        offline, offline_after, problem = _offline(canary)
        agree = (offline, offline_after) == (live, after)
        ok &= live == want and agree
        rows.append((canary.name, canary.fault, str(canary.rollouts), str(canary.violated), live,
                     '-' if after is None else f'{after} rollouts',
                     problem or f'{offline}' + ('' if offline_after is None else f' after {offline_after}'),
                     '' if live == want and agree else 'MISMATCH'))
    head = ('canary', 'fault', 'rollouts', 'violated', 'live gate', 'decided after', 'gate --sequential on bags', '')
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    _say('')
    for r in [head] + rows:
        _say('  '.join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    _say('')
    for canary in canaries:
        _say(f'report ({canary.name}): {canary.folder / "audit" / "report.html"}; alerts: '
             f'{canary.folder / "alerts.jsonl"}')
    _say(f'({time.monotonic() - t_start:.0f} s in all)')
    return 0 if ok else 1
