"""``bag_player``: replay a recorded rosbag2 bag (MCAP or SQLite3, via rosbags)
into live topics, for feeding recorded inputs to the live nodes (what
``ros2 bag play`` does where rosbag2 is not installed).

Parameters:
    bag (string, required): the bag directory.
    topics (string list, all): only these topics.
    rate (double, 1.0): playback speed factor (bag time / wall time).
    wait_for_subscribers (int, 0): wait until every publisher has this many
        subscribers before the first message.
Messages keep their recorded content (the stamps inside are not rewritten);
``/tf_static`` is published transient-local like tf2 does.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from rclpy.node import Node

from ..bag import open_bag
from ..errors import SafemanipError
from .conversions import message_class
from .params import RosParameters, check_range
from .qos import RECORDING, STATIC_TF
from .runner import run_node, wait_acked


class BagPlayer(RosParameters, Node):
    def __init__(self) -> None:
        super().__init__('bag_player')
        self.declare_parameter('bag', '')
        self.declare_parameter('topics', [''])
        self.declare_parameter('rate', 1.0)
        self.declare_parameter('wait_for_subscribers', 0)
        path = self.get_parameter('bag').value
        if not path:
            raise SafemanipError('bag_player: parameter bag is required')
        check_range(self, 'rate', 1e-3, 1e3)      # bag time per wall time
        wanted = {t for t in self.get_parameter('topics').value if t}
        # Open for the node's life (closed once played); BagReadError names the bag.
        self._open = contextlib.ExitStack()
        bag = self._open.enter_context(open_bag(path))
        self.connections = [c for c in bag.connections if not wanted or c.topic in wanted]
        if wanted - {c.topic for c in self.connections}:
            self._open.close()
            raise SafemanipError(f'{path}: topics {sorted(wanted - {c.topic for c in self.connections})} not in '
                                 f'the bag (it has {sorted({c.topic for c in bag.connections})})')
        self.publishers_by_topic = {}
        try:
            classes = {c.topic: message_class(c.msgtype) for c in self.connections}
        except SafemanipError as err:       # a type this installation lacks
            self._open.close()
            raise SafemanipError(f'{path}: {err}') from err
        for topic, cls in classes.items():
            self.publishers_by_topic[topic] = self.create_publisher(
                cls, topic, STATIC_TF if topic == '/tf_static' else RECORDING)
        self._messages = bag.messages(self.connections)
        self.done = False
        self._started: tuple[float, int] | None = None
        self._pending: tuple[Any, int, bytes] | None = None
        self.create_timer(0.002, self._tick)

    def _tick(self) -> None:
        need = int(self.get_parameter('wait_for_subscribers').value)
        if self._started is None:
            if any(p.get_subscription_count() < need for p in self.publishers_by_topic.values()):
                return
        rate = float(self.get_parameter('rate').value)
        while True:
            if self._pending is None:
                try:
                    self._pending = next(self._messages)
                except StopIteration:
                    self._open.close()
                    # Reliable subscribers get the last messages before we exit (2 s a topic).
                    publishers = list(self.publishers_by_topic.values())
                    wait_acked(publishers, timeout_s=2.0 * len(publishers))
                    self.done = True
                    return
            conn, stamp_ns, raw = self._pending
            if self._started is None:
                self._started = (time.monotonic(), stamp_ns)
            due = self._started[0] + (stamp_ns - self._started[1]) * 1e-9 / rate
            if time.monotonic() < due:
                return
            self.publishers_by_topic[conn.topic].publish(bytes(raw))
            self._pending = None


def main(args: list[str] | None = None) -> int:
    return run_node(BagPlayer, 'bag_player', args, until=lambda node: node.done)
