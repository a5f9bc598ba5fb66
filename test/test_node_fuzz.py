"""Every node executable, started as ``ros2 run`` would start it, with one
hostile parameter (hypothesis): a wrong type, NaN, an infinity, a negative
or absurd number, a list where a scalar belongs, a path that does not
exist.  Each either comes up (the value was fine) or exits 2 with one line
naming the node and the problem; never an internal error (exit 70) or a
traceback.  (The offline commands have test_cli_fuzz.py.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.ros
BIN = Path(sys.executable).parent
UP_S = 6.0
"""Still running after this long: the node took the value (and is stopped)."""


def _declared(module: str) -> list[str]:
    from test_launch_files import declared_parameters  # one by one, and from the settings tables
    names = sorted(declared_parameters(module) - {'use_sim_time'})
    assert names, module
    return names


@pytest.fixture(scope='module')
def nodes(tmp_path_factory) -> dict[str, tuple[list[str], list[str]]]:
    """Executable → (the parameters that make it come up, the parameters it declares)."""
    d = tmp_path_factory.mktemp('node_fuzz')
    (d / 'trace.jsonl').write_text('{"a": true}\n' * 5)
    robot = str(REPO / 'config' / 'robots' / 'panda_demo.yaml')
    grounding = _declared('safemanip_ros.nodes.grounding_nodes')
    return {
        'monitor': (['autostart:=true', f'properties:=[{REPO / "config" / "properties" / "safemanip.yaml"}]',
                     f'scene:={REPO / "config" / "scenes" / "kitchen_demo.yaml"}'],
                    _declared('safemanip_ros.nodes.monitor_node')),
        'supervisor': (['autostart:=true'], _declared('safemanip_ros.nodes.supervisor_node')),
        'joint_state_grounding': ([f'config:={robot}'], grounding),
        'contact_grounding': ([f'config:={robot}'], grounding),
        'tf_grounding': ([f'config:={robot}'], grounding),
        'recorder': (['autostart:=true', f'bag_path:={d / "bag"}'], _declared('safemanip_ros.nodes.recorder_node')),
        'gate': (["limits:=['p=0.1']"], _declared('safemanip_ros.nodes.gate_node')),
        'trace_player': ([f'trace_file:={d / "trace.jsonl"}', 'loop:=true'],
                         _declared('safemanip_ros.nodes.trace_player')),
    }


VALUES = st.sampled_from(['-5.0', '.nan', '.inf', '-.inf', '1e308', '0', '-1', '0.0', "''", 'abc', '[1, 2]',
                          '[a, b]', 'true', '10', '1e-300', "'/proc/version/x.yaml'", '99999999999', "['']"])


def _exit_or_up(cmd: list[str], log: Path, up_s: float, cwd: Path) -> int | None:
    """Run ``cmd`` (output to ``log``): its exit code, or None when it is
    still running after ``up_s`` (it came up; it is then stopped)."""
    with open(log, 'w') as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True, cwd=cwd)
        try:
            return proc.wait(timeout=up_s)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            return None


def _our_error_lines(text: str) -> list[str]:
    """Lines of ours that say error (rcl's and rclpy's own log lines left out)."""
    return [line for line in text.splitlines() if 'error' in line.lower() and not line.startswith('[')]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(data=st.data())
def test_no_node_ends_in_an_internal_error(nodes, data, tmp_path):
    exe = data.draw(st.sampled_from(sorted(nodes)), label='executable')
    base, declared = nodes[exe]
    name = data.draw(st.sampled_from(declared), label='parameter')
    value = data.draw(VALUES, label='value')
    params = [p for p in base if not p.startswith(f'{name}:=')] + [f'{name}:={value}']
    args = [str(BIN / exe), '--ros-args', *[a for p in params for a in ('-p', p)]]
    log = tmp_path / f'{exe}.log'
    rc = _exit_or_up(args, log, UP_S, tmp_path)
    text = log.read_text()
    assert 'Traceback' not in text, (args, text[-3000:])
    if rc is not None:
        assert rc in (0, 1, 2, 4), (args, rc, text[-3000:])
        if rc == 2:
            errors = _our_error_lines(text)
            assert len(errors) == 1 and errors[0].startswith(f'{exe}: error:'), (args, text[-3000:])


RUN_FLAGS = st.sampled_from(['--config', '--properties', '--only', '--policy', '--controller-topic', '--bag',
                             '--realtime'])
RUN_VALUES = st.sampled_from(['', 'nope', '0', '-3', '99', 'a b', '/', '/proc/version/x', '~x', 'config', '.',
                              'no_forbidden_contact', '[a:b]', 'garbage.yaml', 'empty.yaml', 'folder'])


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(data=st.data())
def test_safemanip_run_with_a_hostile_flag_never_ends_in_an_internal_error(data, tmp_path):
    """``safemanip run`` with one of its own flags hostile (a path missing,
    a folder, garbage YAML, a topic name ROS refuses, a priority out of
    range): it comes up or exits 2 with one line, never exit 70 or a traceback."""
    flag, value = data.draw(RUN_FLAGS, label='flag'), data.draw(RUN_VALUES, label='value')
    (tmp_path / 'garbage.yaml').write_text(': : [\n\x00')
    (tmp_path / 'empty.yaml').write_text('')
    (tmp_path / 'folder').mkdir(exist_ok=True)
    value = str(tmp_path / value) if value in ('garbage.yaml', 'empty.yaml', 'folder') else value
    args = {'--config': str(REPO / 'config' / 'robots' / 'panda_demo.yaml'), '--bag': str(tmp_path / 'bag'),
            flag: value}
    cmd = [str(BIN / 'safemanip'), 'run', '--no-camera', *[a for k, v in args.items() for a in (k, v)]]
    log = tmp_path / 'run.log'
    rc = _exit_or_up(cmd, log, UP_S * 2, tmp_path)
    text = log.read_text()
    assert 'Traceback' not in text and rc != 70, (cmd, text[-3000:])
    if rc is not None and rc != 0:
        assert rc == 2, (cmd, rc, text[-3000:])
        errors = [line for line in _our_error_lines(text) if line.startswith('safemanip')]
        assert len(errors) == 1, (cmd, text[-3000:])
