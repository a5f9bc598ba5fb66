"""``trace_player``: publish a recorded predicate trace as PredicateArray messages.

Reads a trace in the ``safemanip check`` format (JSONL, one step per line: an
object of atom → bool, or a list of the true atoms) and publishes one
``safemanip_ros/PredicateArray`` per step at ``rate_hz``, stamped with the
node's clock.  With a list step, every predicate named anywhere in the trace
is published (true or false), so subscribers see explicit false values.

Parameters:
    trace_file (string, required): the JSONL trace.
    rate_hz (double, 20.0): steps per second.
    topic (string, "predicates"): output topic.
    source (string, "trace_player"): the ``source`` field of each predicate.
    loop (bool, false): start again after the last step instead of exiting.
    wait_for_subscribers (int, 0): hold the first step until this many
        subscribers are matched (so a reliable subscriber sees step 0).
"""

from __future__ import annotations

from rclpy.node import Node

from safemanip_ros.msg import PredicateArray

from ..errors import SafemanipError
from ..ltlf.trace import read_traces
from ..settings import RATE_HZ, TRACE_PLAYER
from .conversions import predicate_array
from .params import RosParameters, check_setting, declare_settings
from .qos import RECORDING
from .runner import run_node, wait_acked


class TracePlayer(RosParameters, Node):
    def __init__(self) -> None:
        super().__init__('trace_player')
        declare_settings(self, TRACE_PLAYER)
        path = self.get_parameter('trace_file').value
        if not path:
            raise SafemanipError('trace_player: parameter trace_file is required')
        rate_hz = float(check_setting(self, RATE_HZ))
        traces = read_traces(path)      # the one trace reader: null (and an unmentioned name) is unknown
        if len(traces) != 1:
            raise SafemanipError(f'trace_player: {path} is a batch of {len(traces)} traces; give one trace')
        frames = traces[0].frames
        names = sorted({n for f in frames for n in f.values})
        self._frames = [{n: f.value(n) for n in names} for f in frames]
        self._source = self.get_parameter('source').value
        self._loop = bool(self.get_parameter('loop').value)
        self._wait_for = int(self.get_parameter('wait_for_subscribers').value)
        self._index = 0
        self._seq = 0
        self.done = False
        qos = RECORDING
        self._pub = self.create_publisher(PredicateArray, self.get_parameter('topic').value, qos)
        self._timer = self.create_timer(1.0 / rate_hz, self._tick)
        self.get_logger().info(f'playing {len(self._frames)} steps of {path} at {rate_hz} Hz')

    def _tick(self) -> None:
        if self._seq == 0 and self._pub.get_subscription_count() < self._wait_for:
            return
        if self._index >= len(self._frames):
            if not self._loop:
                self._timer.cancel()
                wait_acked([self._pub])   # deliver the last step before exiting
                self.done = True
                return
            self._index = 0
        stamp_ns = self.get_clock().now().nanoseconds
        self._pub.publish(predicate_array(self._frames[self._index], stamp_ns, self._source, self._seq))
        self._index += 1
        self._seq += 1


def main(args: list[str] | None = None) -> int:
    return run_node(TracePlayer, 'trace_player', args, until=lambda node: node.done)
