"""The repository builds as a ROS 2 package with colcon (against the venv's
ROS 2 prefix from the PyPI wheels) and its installed executables run from
install/safemanip_ros/lib/safemanip_ros/, importing the installed package
and its generated messages."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
VENV = Path(sys.prefix)


@pytest.fixture(scope='module')
def colcon_install(tmp_path_factory) -> Path:
    colcon = VENV / 'bin' / 'colcon'
    assert colcon.exists(), 'colcon-common-extensions is installed by the set-up (requirements/dev.txt)'
    ws = tmp_path_factory.mktemp('ws')
    (ws / 'src').mkdir()
    (ws / 'src' / 'safemanip_ros').symlink_to(REPO)
    env = dict(os.environ, PATH=f"{VENV / 'bin'}:{os.environ['PATH']}", AMENT_PREFIX_PATH=str(VENV),
               CMAKE_PREFIX_PATH=str(VENV))
    proc = subprocess.run(
        [str(colcon), 'build', '--event-handlers', 'console_cohesion+',
         '--cmake-args', f'-DPython3_EXECUTABLE={sys.executable}', '-DBUILD_TESTING=OFF'],
        cwd=ws, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return ws / 'install'


def _in_install(install: Path, command: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'AMENT_PREFIX_PATH')}
    env['PATH'] = f"{VENV / 'bin'}:{env['PATH']}"
    script = f'source {install}/safemanip_ros/share/safemanip_ros/local_setup.bash && {command}'
    return subprocess.run(['bash', '-c', script], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_installed_layout(colcon_install: Path):
    lib = colcon_install / 'safemanip_ros' / 'lib' / 'safemanip_ros'
    assert sorted(p.name for p in lib.iterdir()) == sorted(
        line.split(' = ')[0] for line in (REPO / 'resource' / 'executables.txt').read_text().splitlines()
        if ' = ' in line and not line.startswith('#'))
    share = colcon_install / 'safemanip_ros' / 'share' / 'safemanip_ros'
    assert (share / 'package.xml').is_file()
    assert (share / 'launch' / 'trace_player.launch.py').is_file()
    assert (share / 'config' / 'params' / 'trace_player.yaml').is_file()


def test_installed_executable_runs_from_install(colcon_install: Path, tmp_path: Path):
    exe = colcon_install / 'safemanip_ros' / 'lib' / 'safemanip_ros' / 'safemanip'
    trace = tmp_path / 'trace.jsonl'
    trace.write_text('{"a": true}\n{"a": false}\n')
    proc = _in_install(colcon_install, f"{exe} --version && {exe} check 'G a' {trace} --json", tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == 'safemanip_ros 0.1.0'
    assert '"verdicts": ["presumably_true", "false"]' in lines[1]


def test_installed_package_and_messages_are_the_installed_ones(colcon_install: Path, tmp_path: Path):
    code = ('import safemanip_ros, safemanip_ros.msg as m; '
            'print(safemanip_ros.__file__); print(m.__file__); print(m.Verdict.VERDICT_PRESUMABLY_TRUE)')
    proc = _in_install(colcon_install, f'python -c "{code}"', tmp_path)
    assert proc.returncode == 0, proc.stderr
    pkg_file, msg_file, const = proc.stdout.split()
    assert pkg_file.startswith(str(colcon_install)) and msg_file.startswith(str(colcon_install))
    assert const == '3'
