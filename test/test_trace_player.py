"""trace_player, in its own process, publishes a JSONL trace over DDS."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros_helpers import ros_node, spin_until

from safemanip_ros.msg import PredicateArray
from safemanip_ros.nodes.conversions import predicate_values

pytestmark = pytest.mark.ros


@pytest.mark.slow
def test_trace_player_publishes_every_step(tmp_path: Path):
    trace = tmp_path / 'trace.jsonl'
    trace.write_text('["a"]\n{"a": false, "b": true}\n["a", "b"]\n')
    got: list[dict] = []
    proc = subprocess.Popen([str(Path(sys.executable).parent / 'trace_player'), '--ros-args', '-p',
                             f'trace_file:={trace}', '-p', 'rate_hz:=5.0', '-p', 'wait_for_subscribers:=1'],
                            stderr=subprocess.PIPE, text=True)
    try:
        with ros_node('trace_player_test') as (node, executor):
            node.create_subscription(PredicateArray, 'predicates',
                                     lambda m: got.append((m.seq, predicate_values(m))),
                                     QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE))
            spin_until(executor, lambda: len(got) >= 3)
            assert proc.wait(timeout=30) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert got == [(0, {'a': True, 'b': False}), (1, {'a': False, 'b': True}), (2, {'a': True, 'b': True})]


def test_trace_player_bad_trace_exits_2(tmp_path: Path):
    trace = tmp_path / 'trace.jsonl'
    trace.write_text('"nope"\n')
    proc = subprocess.run([str(Path(sys.executable).parent / 'trace_player'), '--ros-args', '-p',
                           f'trace_file:={trace}'], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and 'trace.jsonl:1: a step must be a JSON object' in proc.stderr
