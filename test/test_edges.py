"""Names and counts a person hands the tool are checked where they enter:
topic names with ROS substitutions, a property that shares a category's
name, and a recorded MonitorMetrics that is not one — each one line, exit 2,
never an internal error."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import REPO, run_cli

from safemanip_ros.errors import SpecError
from safemanip_ros.ros_names import namespace_problem, topic_problem

BIN = [sys.executable, '-m', 'safemanip_ros.cli.main']
CONFIG = REPO / 'config' / 'robots' / 'panda_demo.yaml'


@pytest.mark.parametrize('name, ok', [
    ('/arm/joint_states', True), ('joint_trajectory_controller/joint_trajectory', True), ('~/acknowledge', True),
    ('/x/{y}', False), ('{node}', False), ('a//b', False), ('/a/', False), ('1a', False), ('a-b', False),
    ('~x', True), ('~', True), ('x~', False), ('', False), ('/', False)])
def test_topic_names_are_checked_as_rcl_would(name, ok):
    """As rcl's own validation judges them; substitutions, which rcl would expand, are refused."""
    from rclpy.exceptions import InvalidTopicNameException
    from rclpy.expand_topic_name import expand_topic_name
    from rclpy.validate_full_topic_name import validate_full_topic_name
    from rclpy.validate_topic_name import validate_topic_name
    assert (topic_problem(name) is None) == ok, topic_problem(name)
    if '{' not in name:
        try:
            validate_topic_name(name)
            validate_full_topic_name(expand_topic_name(name, 'node', '/ns'))
            rcl_ok = True
        except InvalidTopicNameException:
            rcl_ok = False
        assert rcl_ok == ok, name


def _one_line(proc: subprocess.CompletedProcess, words: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.mark.slow
def test_substitutions_in_names_are_one_line_errors(tmp_path):
    _one_line(run_cli('gate', '--live', '--robot', '{x}', '--max-rate', 'p=0.1', '--max-duration-s', '1'),
              "--robot '{x}': ROS substitutions ({...}) are not expanded here")
    assert namespace_problem('/r1/') is None
    _one_line(run_cli('run', '--config', str(CONFIG), '--controller-topic', '/arm/{ns}/hold'),
              "--controller-topic '/arm/{ns}/hold': ROS substitutions")
    robot = tmp_path / 'robot.yaml'
    robot.write_text(CONFIG.read_text() + '\nskills: {topic: "/x/{y}"}\n')
    _one_line(run_cli('run', '--config', str(robot)), 'skills.topic: \'/x/{y}\': ROS substitutions')
    robot.write_text(CONFIG.read_text() + '\nwrench_topic: "/ft sensor"\n')
    _one_line(run_cli('doctor', str(tmp_path), '--config', str(robot)), "wrench_topic: '/ft sensor': part")


def test_a_property_with_a_categorys_name_is_refused(tmp_path):
    from safemanip_ros.spec.suite import load_suite
    suite = tmp_path / 'suite.yaml'
    suite.write_text('suite: s\nrate_hz: 20\npredicates:\n  a: {description: "a"}\n  b: {description: "b"}\n'
                     'properties:\n'
                     '  - {name: grasp, category: grasp, formula: "G !a", trigger: "true", recovery: "true", description: "x"}\n')
    with pytest.raises(SpecError, match=r"property 'grasp' has the name of a category \(of grasp\); rename one"):
        load_suite(suite)
    suite.write_text(suite.read_text().replace('category: grasp', 'category: handling') +
                     '  - {name: handling, category: other, formula: "G !b", trigger: "true", recovery: "true", description: "y"}\n')
    with pytest.raises(SpecError, match=r"property 'handling' has the name of a category \(of grasp\)"):
        load_suite(suite)


@pytest.mark.slow
def test_a_recorded_metrics_message_that_is_not_one_stops_the_rebuild_in_one_line(tmp_path):
    from test_gate_live import final_metrics_cdr, metrics_bag
    raw = final_metrics_cdr('e1', 1)
    metrics_bag(tmp_path / 'bag', [raw, raw[:len(raw) // 2]])         # the second cut short
    proc = subprocess.run([*BIN, 'gate', '--live', '--max-rate', 'p=0.05', '--rebuild-from', str(tmp_path / 'bag')],
                          capture_output=True, text=True, timeout=120)
    _one_line(proc, '/metrics message 2: not a readable MonitorMetrics')
    assert str(tmp_path / 'bag') in proc.stderr


def test_the_fixed_gate_says_its_decision_in_plain_words(tmp_path):
    ok = '[["fixture_fully_open_microwave"], ["reach_in_microwave", "fixture_fully_open_microwave"], []]'
    (tmp_path / 'b.jsonl').write_text('\n'.join([ok] * 20) + '\n')
    audit = run_cli('audit', str(tmp_path / 'b.jsonl'), '--scene', str(REPO / 'config' / 'scenes' / 'kitchen_demo.yaml'),
                    '--out', str(tmp_path / 'o'), '--quiet')
    assert audit.returncode == 0, audit.stderr
    gate = run_cli('gate', str(tmp_path / 'o' / 'report.json'), '--max-rate', 'enclosure_access=0.2')
    assert gate.returncode == 1
    assert 'FAIL: enclosure_access (category): 0 of 20 triggers violated in 20 rollouts; upper bound 0.168 <= ' \
           'limit 0.2 at 0.95 confidence; only 20 triggers (< 30): too little evidence' in gate.stdout, gate.stdout


@pytest.mark.parametrize('args, words', [
    (['ack', '--supervisor', '{x}', '--timeout-s', '1'], "--supervisor '{x}': ROS substitutions"),
    (['resume', '--supervisor', 'a b', '--timeout-s', '1'], "--supervisor 'a b': part 'a b'"),
    (['ack', '--supervisor', '', '--timeout-s', '1'], '--supervisor an empty node name'),
    (['watch', '--once', '--timeout-s', '1', '--ros-args', '-r', '__ns:=/bad', 'ns'], "rcl refuses them"),
    (['ack', '--timeout-s', '1', '--ros-args', '--bogus'], "rcl refuses them"),
])
def test_operator_commands_refuse_names_and_ros_arguments_rcl_refuses(args, words):
    proc = run_cli(*args)
    assert proc.returncode == 2 and words in proc.stderr, (proc.returncode, proc.stderr)
    assert 'internal error' not in proc.stderr and 'Traceback' not in proc.stderr


@pytest.mark.parametrize('exe, params, words', [
    ('supervisor', ["monitor_status_topic:='/proc/version/x.yaml'"],
     "parameter monitor_status_topic = '/proc/version/x.yaml': part 'x.yaml'"),
    ('monitor', ["predicate_topics:=['/a/x.yaml']", f'properties:=[{REPO}/config/properties/safemanip.yaml]',
                 f'scene:={REPO}/config/scenes/kitchen_demo.yaml'], 'configure failed: failed to resolve name'),
    ('recorder', ["record_topics:=['/a/x.yaml:std_msgs/msg/String']"], 'configure failed: failed to resolve name'),
])
def test_a_topic_parameter_rcl_cannot_resolve_stops_the_node_in_one_line(exe, params, words):
    """Found by the node fuzz: rcl's resolve_topic_name raises its own RCLError in configure (exit 70)."""
    args = [str(__import__('pathlib').Path(sys.executable).parent / exe), '--ros-args', '-p', 'autostart:=true']
    for p in params:
        args += ['-p', p]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and words in proc.stderr, (proc.returncode, proc.stderr[-2000:])
    assert 'Traceback' not in proc.stderr
