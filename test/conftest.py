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


def run_cli(*args: str, input: str | None = None, timeout: float = 120, cwd: Path | None = None
            ) -> subprocess.CompletedProcess:
    """Run the installed ``safemanip`` command."""
    exe = shutil.which('safemanip', path=str(Path(sys.executable).parent)) or 'safemanip'
    return subprocess.run([exe, *args], capture_output=True, text=True, input=input, timeout=timeout,
                          cwd=cwd)


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


def pytest_collection_modifyitems(items: list) -> None:
    rank = {name: k for k, name in enumerate(_LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))    # stable: the rest keep their order
