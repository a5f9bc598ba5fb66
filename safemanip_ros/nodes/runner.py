"""Running one node as an executable: clean start-up errors, clean shutdown."""

from __future__ import annotations

import sys
from typing import Callable

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node

from ..errors import SafemanipError


def take_delivered(sub, callback: Callable[[object], None], limit: int = 10000) -> bool:
    """Take every message already delivered to ``sub`` and hand each to
    ``callback``, now, instead of waiting for the executor: it takes one
    message per subscription per wake-up, and runs timers first.  Returns
    False when this rclpy does not allow taking directly (its internals
    changed); the executor's order then stands."""
    for _ in range(limit):
        try:
            with sub.handle:
                taken = sub.handle.take_message(sub.msg_type, sub.raw)
        except Exception:      # rclpy internals, not our input: fall back to the executor's order
            return False
        if taken is None:
            break
        callback(taken[0])
    return True


def run_node(factory: Callable[[], Node], name: str, args: list[str] | None,
             until: Callable[[Node], bool] | None = None, on_exit: Callable[[Node], None] | None = None) -> int:
    """Create the node and spin it until shutdown (or until ``until(node)``).

    A configuration error at start-up is printed as one line and exits 2."""
    rclpy.init(args=args)
    try:
        node = factory()
    except SafemanipError as err:
        print(f'{name}: error: {err.one_line()}', file=sys.stderr)
        rclpy.try_shutdown()
        return 2
    try:
        if until is None:
            rclpy.spin(node)
        else:
            while rclpy.ok() and not until(node):
                rclpy.spin_once(node, timeout_sec=0.1)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if on_exit is not None:
            on_exit(node)
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


def autostarted(factory: Callable[[], Node]) -> Callable[[], Node]:
    """Wrap a lifecycle node factory: with its ``autostart`` parameter true,
    the node configures and activates itself (no lifecycle manager needed)."""
    def make() -> Node:
        node = factory()
        if node.get_parameter('autostart').value:
            node.trigger_configure()
            node.trigger_activate()
        return node
    return make
