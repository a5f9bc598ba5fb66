"""Shared test set-up.

DDS traffic stays on this machine (ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST)
and each test session uses its own ROS domain so parallel runs do not see
each other's topics.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
# pytest-xdist workers inherit the controller's environment: each takes its own
# domain next to the run's base, so one worker's nodes never hear another's.
_WORKER = os.environ.get('PYTEST_XDIST_WORKER', '')
if _WORKER:
    _base = int(os.environ.setdefault('SAFEMANIP_TEST_DOMAIN_BASE', str(random.SystemRandom().randint(1, 90))))
    os.environ['ROS_DOMAIN_ID'] = str(_base + 1 + int(_WORKER.removeprefix('gw')))
else:
    os.environ.setdefault('ROS_DOMAIN_ID', str(random.SystemRandom().randint(1, 90)))
    os.environ.setdefault('SAFEMANIP_TEST_DOMAIN_BASE', os.environ['ROS_DOMAIN_ID'])

REPO = Path(__file__).resolve().parents[1]
VENV = Path(sys.prefix)


@pytest.fixture(scope='session')
def repo() -> Path:
    return REPO


_OFFLINE_COMMANDS = frozenset({'check', 'compile', 'monitor-trace', 'predicates', 'ontology', 'config', 'audit',
                               'bag', 'doctor', 'gate'})
"""Subcommands that start no ROS node and no child process of their own (``doctor`` and ``gate`` unless
``--live``; ``audit`` unless ``--workers`` or ``--engine``)."""
_PROCESS_FLAGS = frozenset({'--live', '--workers', '--engine', '--ray-address'})


def run_cli(*args: str, input: str | None = None, timeout: float = 120, cwd: Path | None = None,
            process: bool = False) -> subprocess.CompletedProcess:
    """Run ``safemanip ARGS`` and return what it printed and its exit status.

    An offline subcommand (:data:`_OFFLINE_COMMANDS`) runs in this process through
    :func:`safemanip_ros.cli.main.main`, its standard streams captured: what the command
    says and does is the same code, without a second interpreter's start-up (about
    half a second of imports, paid 130 times by the suite).  Anything that starts
    nodes or children, and any test of the process boundary itself (``process=True``:
    exit by signal, a closed pipe, the installed entry point), runs the installed
    ``safemanip`` executable with ``timeout`` seconds."""
    flags = {a.split('=')[0] for a in args}
    if not process and args and args[0] in _OFFLINE_COMMANDS and not flags & _PROCESS_FLAGS:
        return _run_cli_here(list(args), input, cwd)
    exe = shutil.which('safemanip', path=str(Path(sys.executable).parent)) or 'safemanip'
    return subprocess.run([exe, *args], capture_output=True, text=True, input=input, timeout=timeout,
                          cwd=cwd)


def _run_cli_here(args: list[str], input: str | None, cwd: Path | None) -> subprocess.CompletedProcess:
    """``safemanip ARGS`` through ``main()`` in this process (:func:`run_cli`)."""
    import contextlib
    import io

    from safemanip_ros.cli.main import main
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    stdin = sys.stdin
    try:
        if cwd is not None:
            os.chdir(cwd)
        sys.stdin = io.StringIO(input or '')
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(args)
            except SystemExit as done:      # argparse: --help, --version, a usage error
                code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
                if isinstance(done.code, str):
                    print(done.code, file=sys.stderr)
    finally:
        sys.stdin = stdin
        os.chdir(here)
    return subprocess.CompletedProcess(['safemanip', *args], code, out.getvalue(), err.getvalue())


# The longest files first: `make test` runs them in five workers (pytest-xdist,
# --dist loadfile), and a two-minute file scheduled last would run alone at the end.
_LONGEST_FIRST = ('test_demo_canary.py', 'test_demo.py', 'test_colcon_build.py', 'test_bench_smoke.py',
                  'test_node_fuzz.py', 'test_sim.py', 'test_audit.py', 'test_live_faults.py',
                  'test_gate_sequential.py', 'test_bad_input.py', 'test_gate_live.py')


def write_policy_traces(root: Path) -> list[Path]:
    """Two policies' JSONL predicate traces under ``root`` (one folder each),
    four rollouts in all: policy_a's run1 enters a closed microwave (a
    violation); policy_b's run1 enters it open, its batch.jsonl holds two
    rollouts (the second one reaches task_done)."""
    a, b = root / 'policy_a', root / 'policy_b'
    a.mkdir()
    b.mkdir()
    (a / 'run1.jsonl').write_text('{"reach_in_microwave": true, "fixture_fully_open_microwave": false}\n'
                                  '{"reach_in_microwave": false}\n')
    (b / 'run1.jsonl').write_text('["fixture_fully_open_microwave"]\n["reach_in_microwave", '
                                  '"fixture_fully_open_microwave"]\n[]\n')
    (b / 'batch.jsonl').write_text('[[], ["reach_in_microwave"]]\n[["task_done"]]\n')
    return [a, b]


def wait_for(cond: Callable[[], bool], timeout_s: float = 20.0) -> bool:
    """Poll ``cond`` every 10 ms until it holds or ``timeout_s`` passed: tests wait for
    conditions, never for wall-clock luck."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def simulated_recording(out: Path, fault: str, seed: int, task: str = 'Lift') -> Path:
    """A robosuite rollout recorded as a robot stack's ``ros2 bag record`` would
    have it (joint states, TF, contacts, /clock) into ``out``; its bag."""
    from safemanip_ros.sim.recording import RolloutSpec, run_rollout
    from safemanip_ros.sim.world import SimWorld, import_robosuite
    import_robosuite()
    world = SimWorld(task)
    spec = RolloutSpec(task, fault, seed)
    try:
        run_rollout(world, spec, out)
    finally:
        world.close()
    return out / spec.name


# ---------------------------------------------------------------- tiers
# Every test is in one tier (a marker, set here from its file so a new file cannot miss it):
#   unit         pure code, no process, no DDS
#   integration  real DDS nodes, subprocesses, the CLI (found by what the file uses)
#   live         real-time assertions on the wall clock (deadlines, latencies, overrun lines): `make test` runs
#                these in a stage of their own, after the rest, on an otherwise idle machine
#   system       the demos, physics, colcon, benches, static analysis, the docs and journeys end to end
LIVE_FILES = frozenset({
    'test_live_timing.py', 'test_live_faults.py', 'test_realtime.py', 'test_gate_fleet.py', 'test_closing_pacing.py',
    'test_run_recorder.py', 'test_stack_integration.py', 'test_controllers.py', 'test_supervisor.py',
    'test_recording.py'})
SYSTEM_FILES = frozenset({
    'test_demo.py', 'test_demo_canary.py', 'test_colcon_build.py', 'test_bench_smoke.py', 'test_sim.py',
    'test_docs_run.py', 'test_journeys.py', 'test_setup.py', 'test_lint.py', 'test_node_fuzz.py',
    'test_physical.py', 'test_safemanip_fidelity.py', 'test_ltlf_mona.py', 'test_security_enforcement.py',
    'test_cli_fuzz.py'})
TIERS = ('unit', 'integration', 'live', 'system')
# ``@pytest.mark.slow`` on a unit or integration test over about a second (setup and teardown included, on a
# 2-core machine): `make check`, the inner loop, leaves those to `make test`.  The run's summary names any test
# over CHECK_BUDGET_S that is not marked.
CHECK_BUDGET_S = 2.0
_USES_PROCESSES = ('subprocess', 'run_cli', 'rclpy', 'ros_node', 'pytest.mark.ros')


def tier_of(path: Path) -> str:
    """The tier of the tests in file ``path`` (see above)."""
    if path.name in LIVE_FILES:
        return 'live'
    if path.name in SYSTEM_FILES:
        return 'system'
    text = path.read_text(errors='replace')
    return 'integration' if any(word in text for word in _USES_PROCESSES) else 'unit'


def pytest_configure(config) -> None:
    for tier in TIERS:
        config.addinivalue_line('markers', f'{tier}: the {tier} tier (test/conftest.py, tier_of)')


def pytest_collection_modifyitems(items: list) -> None:
    tiers: dict[Path, str] = {}
    for item in items:
        if item.path not in tiers:
            tiers[item.path] = tier_of(item.path)
        item.add_marker(getattr(pytest.mark, tiers[item.path]))
    rank = {name: k for k, name in enumerate(_LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))    # stable: the rest keep their order


def pytest_terminal_summary(terminalreporter) -> None:
    """What the run cost, by tier (summed test time: setup, call and teardown) and the ten slowest tests:
    where a suite that must pass on a slower machine spends its time."""
    per_test: dict[str, float] = {}
    tier_of_test: dict[str, str] = {}
    slow: set[str] = set()
    for reports in terminalreporter.stats.values():
        for rep in reports:
            nodeid, duration = getattr(rep, 'nodeid', None), getattr(rep, 'duration', None)
            if not nodeid or duration is None or getattr(rep, 'when', None) is None:
                continue
            per_test[nodeid] = per_test.get(nodeid, 0.0) + float(duration)
            keywords = getattr(rep, 'keywords', {})
            tier_of_test[nodeid] = next((t for t in TIERS if t in keywords), 'unit')
            if 'slow' in keywords:
                slow.add(nodeid)
    if not per_test:
        return
    sums = {t: (sum(d for n, d in per_test.items() if tier_of_test[n] == t),
                sum(1 for n in per_test if tier_of_test[n] == t)) for t in TIERS}
    terminalreporter.write_line('suite time by tier (summed over tests): ' + ', '.join(
        f'{t} {s:.0f} s ({n} tests)' for t, (s, n) in sums.items() if n))
    terminalreporter.write_line('ten slowest tests: ' + '; '.join(
        f'{n} {d:.1f} s' for n, d in sorted(per_test.items(), key=lambda kv: -kv[1])[:10]))
    over = sorted((n for n, d in per_test.items() if d > CHECK_BUDGET_S and n not in slow
                   and tier_of_test[n] in ('unit', 'integration')), key=lambda n: -per_test[n])
    if over:
        terminalreporter.write_line(f'{len(over)} test(s) of make check over {CHECK_BUDGET_S:.0f} s, not marked '
                                    f'slow (make check is the fast loop): ' + '; '.join(
                                        f'{n} {per_test[n]:.1f} s' for n in over[:10]))
