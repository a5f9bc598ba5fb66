"""The repository builds as a ROS 2 package with colcon (against the venv's
ROS 2 prefix from the PyPI wheels) and its installed executables run from
install/safemanip_ros/lib/safemanip_ros/, importing the installed package
and its generated messages and services."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

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
    code = ('import safemanip_ros, safemanip_ros.msg as m, safemanip_ros.srv as s; '
            'print(safemanip_ros.__file__); print(m.__file__); print(s.__file__); '
            'print(m.Verdict.VERDICT_PRESUMABLY_TRUE); print(len(s.OpenViolations.Response().open))')
    proc = _in_install(colcon_install, f'python -c "{code}"', tmp_path)
    assert proc.returncode == 0, proc.stderr
    pkg_file, msg_file, srv_file, const, n_open = proc.stdout.split()
    assert all(f.startswith(str(colcon_install)) for f in (pkg_file, msg_file, srv_file))
    assert const == '3' and n_open == '0'


def test_installed_resources_monitor_recorder_and_audit(colcon_install: Path, tmp_path: Path):
    """From the install space (the source tree out of reach): resources come from
    share/safemanip_ros through the ament index; the monitor loads its default
    suite, the recorder writes a bag, and audit reads a bag with the installed
    message definitions."""
    share = colcon_install / 'safemanip_ros' / 'share' / 'safemanip_ros'
    lib = colcon_install / 'safemanip_ros' / 'lib' / 'safemanip_ros'
    code = ('from safemanip_ros.resources import share_dir, msg_dir; from safemanip_ros.bag.typestore import typestore; '
            'print(share_dir()); print(msg_dir()); print("safemanip_ros/msg/PredicateArray" in typestore().types)')
    proc = _in_install(colcon_install, f"python -c '{code}'", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(share), str(share / 'msg'), 'True']

    scene = share / 'config' / 'scenes' / 'kitchen_demo.yaml'
    proc = _in_install(colcon_install, f'timeout -s INT 15 {lib}/monitor --ros-args -p autostart:=true '
                                      f'-p scene:={scene} 2>&1; true', tmp_path)
    assert 'configured:' in proc.stdout and 'property instances' in proc.stdout, proc.stdout[-3000:]

    bag = tmp_path / 'recorded'
    proc = _in_install(colcon_install, f'timeout -s INT 6 {lib}/recorder --ros-args -p autostart:=true '
                                      f'-p bag_path:={bag} 2>&1; true', tmp_path)
    assert (bag / 'metadata.yaml').is_file(), proc.stdout[-3000:]
    assert 'recording' in proc.stdout and 'bag closed' in proc.stdout, proc.stdout[-3000:]

    from safemanip_ros.bag.typestore import typestore
    from safemanip_ros.bag.writer import SplitBagWriter
    ts = typestore()
    Arr, Pred = ts.types['safemanip_ros/msg/PredicateArray'], ts.types['safemanip_ros/msg/Predicate']
    Time, Header = ts.types['builtin_interfaces/msg/Time'], ts.types['std_msgs/msg/Header']
    w = SplitBagWriter(tmp_path / 'episode', 'mcap')
    w.add_topic('/predicates', 'safemanip_ros/msg/PredicateArray')
    for t, reach in enumerate('0011000000'):
        stamp = Time(sec=100, nanosec=t * 50_000_000)
        preds = [Pred(name='reach_in_microwave', value=reach == '1', unknown=False, source='t', data_stamp=stamp),
                 Pred(name='fixture_fully_open_microwave', value=False, unknown=False, source='t', data_stamp=stamp)]
        w.write('/predicates', 100 * 10**9 + t * 50_000_000,
                ts.serialize_cdr(Arr(header=Header(stamp=stamp, frame_id=''), seq=t, predicates=preds),
                                 'safemanip_ros/msg/PredicateArray'))
    w.close()
    out = tmp_path / 'audit'
    proc = _in_install(colcon_install, f'{lib}/safemanip audit {tmp_path / "episode"} --scene {scene} '
                                      f'--only reach_in_fixture_only_when_fully_open --out {out} --quiet', tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    import json
    report = json.loads((out / 'report.json').read_text())
    assert report['rollouts'] == 1
    assert report['properties']['reach_in_fixture_only_when_fully_open']['violations'] == 1
    assert str(share / 'config' / 'properties' / 'safemanip.yaml') in report['config']['properties']
