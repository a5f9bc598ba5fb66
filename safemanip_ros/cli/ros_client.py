"""The ROS side of the operator's commands (``watch``, ``ack``, ``resume``):
a node in a context of its own, spun by an executor of that context, and
SIGINT and SIGTERM both ending the command the same way (an interruption,
cleaned up in order) instead of rclpy's handler shutting the context under a
spinning executor."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

__all__ = ['client_node']


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@contextmanager
def client_node(name: str, ros_args: list[str] | None = None) -> Iterator[tuple[Any, Any]]:
    """``(node, executor)`` for the context; ``ros_args``: what followed
    ``--ros-args`` on the command line (remaps, ``__ns``, log level)."""
    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    from ..errors import SafemanipError

    context = rclpy.Context()
    try:
        rclpy.init(args=['--ros-args', *(ros_args or [])], context=context,
                   signal_handler_options=SignalHandlerOptions.NO)
    except Exception as err:     # rcl's word on the user's --ros-args (unknown ones, a bad remap)
        raise SafemanipError(f'--ros-args {" ".join(ros_args or [])}: rcl refuses them ({type(err).__name__}: '
                             f'{" ".join(str(err).split())})'[:400]) from None
    try:
        node = rclpy.create_node(name, context=context)
    except Exception as err:     # a remapped name or namespace rcl refuses
        rclpy.try_shutdown(context=context)
        raise SafemanipError(f'--ros-args: {" ".join(str(err).split())}'[:400]) from None
    previous = signal.signal(signal.SIGTERM, _interrupt)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        yield node, executor
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
        signal.signal(signal.SIGTERM, previous)
