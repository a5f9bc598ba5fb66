"""The set-up (tools/setup_env.sh, behind `make test` and `make demo`) fails
at once, in one line naming what is missing, and leaves no stamp behind that
would make a later run skip the failed step; a complete environment re-runs
without network work."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

SETUP = REPO / 'tools' / 'setup_env.sh'
BASE_PYTHON = getattr(sys, '_base_executable', sys.executable)


def _path_without(tmp_path: Path, hidden: set[str]) -> str:
    """A PATH with every program of /usr/bin and /bin except ``hidden``."""
    farm = tmp_path / 'bin'
    farm.mkdir()
    for directory in ('/usr/local/bin', '/usr/bin', '/bin'):
        for exe in Path(directory).iterdir():
            name = exe.name
            if name in hidden or any(name.startswith(h + '-') or name.endswith('-' + h) for h in hidden):
                continue
            if not (farm / name).exists():
                (farm / name).symlink_to(exe)
    return str(farm)


def _run(env_updates: dict, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith('PIP_')}
    env.update(SAFEMANIP_VENV=str(tmp_path / 'venv'), PYTHON=BASE_PYTHON, **env_updates)
    return subprocess.run(['bash', str(SETUP)], env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize('hidden, names', [
    ({'cmake'}, 'cmake'),
    ({'cc', 'gcc', 'c++', 'g++', 'x86_64-linux-gnu-gcc', 'x86_64-linux-gnu-g++'}, 'C compiler'),
])
def test_missing_tool_fails_at_once_in_one_line(tmp_path, hidden, names):
    proc = _run({'PATH': _path_without(tmp_path, hidden)}, tmp_path)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('setup: error:') and names in lines[0], proc.stderr
    assert 'apt-get install' in lines[0]
    assert not (tmp_path / 'venv').exists()


def test_no_network_fails_fast_and_leaves_no_stamp(tmp_path):
    proc = _run({'PIP_CONFIG_FILE': os.devnull, 'PIP_INDEX_URL': 'http://127.0.0.1:9/simple',
                 'PIP_DISABLE_PIP_VERSION_CHECK': '1'}, tmp_path)
    assert proc.returncode == 1
    lines = [line for line in proc.stderr.strip().splitlines() if line]
    assert len(lines) == 1 and 'cannot reach the Python package index' in lines[0], proc.stderr
    assert not (tmp_path / 'venv' / '.stamps' / 'requirements').exists()


def test_complete_environment_reruns_without_network(tmp_path):
    # The project's own .venv is complete (the test suite runs in it): a
    # re-run with the package index unreachable must still succeed quickly.
    env = {k: v for k, v in os.environ.items() if not k.startswith('PIP_')}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL='http://127.0.0.1:9/simple',
               SAFEMANIP_VENV=sys.prefix)
    proc = subprocess.run(['bash', str(SETUP)], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert 'installing' not in proc.stdout and 'generating' not in proc.stdout
    assert proc.stdout.strip().endswith('environment ready in ' + sys.prefix)
