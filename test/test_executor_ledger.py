"""The executor ledger: what an executor's thread did between two moments
(safemanip_ros/nodes/executor_ledger.py), on real rclpy nodes."""

from __future__ import annotations

import time

import pytest
import rclpy
from std_msgs.msg import String

from safemanip_ros.nodes.executor_ledger import CallbackLedger, LedgerExecutor, callback_name


def test_a_ledger_counts_names_and_starts_afresh_when_taken():
    ledger = CallbackLedger()
    ledger.waited(0.002, 0.0005)
    ledger.ran('/tf', 0.003)
    ledger.ran('Monitor._build_frames', 0.004)
    ledger.ran('/tf', 0.002)
    ledger.waited(0.001)
    taken = ledger.take()
    assert (taken.callbacks, taken.longest) == (3, 'Monitor._build_frames')
    assert taken.callbacks_s == pytest.approx(0.009) and taken.waited_s == pytest.approx(0.003)
    assert taken.said(names=1) == ('3 callback(s) 9.0 ms (/tf 5.0; the longest one Monitor._build_frames 4.0 ms), '
                                   "the executor's waits 3.0 ms (on a CPU 0.5)")
    again = ledger.take()
    assert (again.callbacks, again.callbacks_s, again.waited_s, again.waiting_cpu_s, again.longest) == \
        (0, 0.0, 0.0, 0.0, '')
    assert again.said() == "no callbacks, the executor's waits 0.0 ms (on a CPU 0.0)"


def test_the_executor_notes_each_callback_by_topic_or_function_and_keeps_errors():
    """Real nodes over DDS: messages reach their subscription and a timer
    runs, each noted under its topic or its function; a callback's error
    propagates out of spin_once as rclpy's executor raises it, and is noted."""
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = rclpy.create_node('ledger_test', namespace='/ledger_test', context=ctx)
    ex = LedgerExecutor(context=ctx)
    ex.add_node(node)
    heard: list[str] = []
    ticks: list[float] = []

    def on_tick() -> None:
        ticks.append(time.monotonic())
    node.create_subscription(String, 'chatter', lambda m: heard.append(m.data), 10)
    timer = node.create_timer(0.01, on_tick)
    pub = node.create_publisher(String, 'chatter', 10)
    try:
        names: dict[str, int] = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (len(heard) < 3 or len(ticks) < 3):
            pub.publish(String(data='x'))
            ex.spin_once(timeout_sec=0.05)
            ex.spin_once(timeout_sec=0.05)
            taken = ex.ledger.take()
            for name in taken._by_name_s:
                names[name] = names.get(name, 0) + 1
        assert len(heard) >= 3 and len(ticks) >= 3, (heard, ticks)
        assert '/ledger_test/chatter' in names, names
        assert any(name.endswith('on_tick') for name in names), names
        assert callback_name(timer) == on_tick.__qualname__

        def broken() -> None:
            raise ValueError('a callback fails')
        timer.destroy()
        node.create_timer(0.01, broken)
        with pytest.raises(ValueError, match='a callback fails'):
            for _ in range(1000):
                ex.spin_once(timeout_sec=0.05)
        assert ex.ledger.take().longest.endswith('broken')
    finally:
        node.destroy_node()
        ex.shutdown()
        rclpy.try_shutdown(context=ctx)


def test_a_guarded_nodes_timer_is_named_by_its_method_not_the_guard():
    """The 60-minute soak's late ticks named ``CallbackGuard._guarded.<locals>.guarded``: every timer of
    our nodes looked alike."""
    from rclpy.node import Node

    from safemanip_ros.nodes.guard import CallbackGuard

    class Ticking(CallbackGuard, Node):
        def on_tick(self) -> None:
            pass

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = Ticking('guarded_ledger_test', context=ctx)
    try:
        timer = node.create_timer(0.01, node.on_tick)
        assert callback_name(timer).endswith('Ticking.on_tick'), callback_name(timer)
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)
