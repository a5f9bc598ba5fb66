"""``bag_player``: replay a recorded rosbag2 bag (MCAP or SQLite3, via rosbags)
into live topics, for feeding recorded inputs to the live nodes (what
``ros2 bag play`` does where rosbag2 is not installed).

Parameters:
    bag (string, required): the bag directory.
    topics (string list, all): only these topics.
    rate (double, 1.0): playback speed factor (bag time / wall time).
    wait_for_subscribers (int, 0): before the first message, wait until
        each topic that something subscribes to has this many subscribers,
        and at least one topic has; a topic nobody subscribes to is not
        waited for.  The topics still short are named when they change
        and every 2 s.
    wait_timeout_s (double, 30.0): play anyway after this long, naming the
        topics still short (0: wait for good).
    clock (bool, false): publish ``/clock`` (rosgraph_msgs/Clock) with the
        bag time of what is played, as ``ros2 bag play --clock`` does, for
        a stack run with ``use_sim_time:=true`` (a bag that recorded
        ``/clock`` plays its own instead).
Messages keep their recorded content (the stamps inside are not rewritten);
``/tf_static`` is published transient-local like tf2 does.  The stamps are
the recording's, in the past: nodes that judge freshness against their
clock must run with ``use_sim_time:=true`` on this player's ``/clock``
(``clock:=true``), or every input reads as stale.

Example::

    bag_player --ros-args -p bag:=bags/demo/clean -p clock:=true -p wait_for_subscribers:=1 -p rate:=2.0
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from rclpy.node import Node

from ..bag import open_bag
from ..errors import SafemanipError
from ..settings import BAG_PLAYER
from .conversions import message_class
from .params import RosParameters, check_setting, declare_settings
from .qos import RECORDING, STATIC_TF
from .runner import run_node, wait_acked


class BagPlayer(RosParameters, Node):
    def __init__(self) -> None:
        super().__init__('bag_player')
        declare_settings(self, BAG_PLAYER)
        for setting in BAG_PLAYER:
            check_setting(self, setting)
        self._wait_since = time.monotonic()
        self._said_at = 0.0
        self._said = ''
        path = self.get_parameter('bag').value
        if not path:
            raise SafemanipError('bag_player: parameter bag is required')
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
        self._clock_pub = None
        if self.get_parameter('clock').value and '/clock' not in {c.topic for c in self.connections}:
            from rosgraph_msgs.msg import Clock
            self._clock_pub = self.create_publisher(Clock, '/clock', 10)
            self._clock_msg = Clock()
        self._messages = bag.messages(self.connections)
        self.done = False
        self._started: tuple[float, int] | None = None
        self._pending: tuple[Any, int, bytes] | None = None
        self.create_timer(0.002, self._tick)

    def _short_topics(self) -> list[str] | None:
        """The subscribed topics with fewer than ``wait_for_subscribers``
        subscribers, or None while no topic has any (nothing listens yet)."""
        need = int(self.get_parameter('wait_for_subscribers').value)
        if need <= 0:
            return []
        counts = {t: p.get_subscription_count() for t, p in self.publishers_by_topic.items()}
        if not any(counts.values()):
            return None
        return sorted(f'{t} ({n} of {need})' for t, n in counts.items() if 0 < n < need)

    def _tick(self) -> None:
        if self._started is None:
            short = self._short_topics()
            if short is None or short:
                waited = time.monotonic() - self._wait_since
                limit = float(self.get_parameter('wait_timeout_s').value)
                what = ', '.join(short) if short else 'any topic (no subscriber yet)'
                if limit and waited >= limit:
                    self.get_logger().warning(f'playing after {limit:g} s without the subscribers waited for on: '
                                              f'{what}')
                else:       # said when it changes, and every 2 s
                    if what != self._said or time.monotonic() - self._said_at >= 2.0:
                        self._said, self._said_at = what, time.monotonic()
                        self.get_logger().info(f'waiting for subscribers on: {what}')
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
            if self._clock_pub is not None:        # the clock reaches this message's time before it does
                self._clock_msg.clock.sec, self._clock_msg.clock.nanosec = divmod(int(stamp_ns), 10**9)
                self._clock_pub.publish(self._clock_msg)
            self.publishers_by_topic[conn.topic].publish(bytes(raw))
            self._pending = None


def main(args: list[str] | None = None) -> int:
    return run_node(BagPlayer, 'bag_player', args, until=lambda node: node.done)
