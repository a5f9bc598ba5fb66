"""The node boundary: no exception in one callback stops the executor.

``safemanip run`` composes every node in one process on one executor, so an
exception escaping one subscription callback (one malformed message) used to
take the monitor and the supervisor down with it.  :class:`CallbackGuard`
wraps every subscription, timer and service callback a node creates: an
exception is caught, counted per cause (callback and exception type), logged
once per cause with the message, and the node keeps running.  Counts are in
``callback_errors`` for status and ``/diagnostics``.

A node whose callbacks may run on two threads (the supervisor spins on a
thread of its own and also takes violations handed over in-process by the
monitor) sets ``_callback_lock``: every guarded callback then runs under it.

Lifecycle transitions (``on_configure`` and the others) are not kept
running: rclpy turns an exception there into a silent ``ERROR``.  The
guard keeps it as ``transition_exception`` and logs it, so whoever brings
the node up (:func:`~.runner.bring_up`) reports the bug it is.
"""

from __future__ import annotations

import contextlib
import traceback
import weakref
from collections import Counter
from typing import Any, Callable, TypeVar

from rclpy.exceptions import NameValidationException

from ..errors import SafemanipError

_TRANSITIONS = ('on_configure', 'on_activate', 'on_deactivate', 'on_cleanup', 'on_shutdown')


def name_problem(err: NameValidationException) -> str:
    """rclpy's three-line message about an invalid topic, service or node
    name as one line: what is wrong, the name, and where."""
    lines = str(err).splitlines()
    if len(lines) < 3:
        return ' '.join(str(err).split())
    return f'{lines[0].rstrip(":")}: {lines[1].strip()} (at character {max(0, lines[2].find("^") - 3)})'


def created(factory: Callable[[], Any], name: str) -> Any:
    """``factory()``, with a topic, service or node name from a parameter
    that ROS refuses raised as a :class:`SafemanipError` naming ``name`` (one
    line: the user's error, exit 2)."""
    try:
        return factory()
    except NameValidationException as err:
        raise SafemanipError(f'{name}: {name_problem(err)}') from None


def _remembering(transition: Callable[..., Any]) -> Callable[..., Any]:
    def run(self: Any, state: Any) -> Any:
        try:
            return transition(self, state)
        except NameValidationException as err:
            # A topic or service name from a parameter that ROS refuses: the user's error, one line.
            from .runner import transition_failed
            return transition_failed(self, transition.__name__.removeprefix('on_'), name_problem(err))
        except Exception as err:     # rclpy would swallow it into ERROR: keep and log it first
            if type(err).__name__ == 'RCLError' and 'failed to resolve name' in str(err):
                # rcl's word on a name from a parameter (resolve_topic_name raises its own error type): the
                # user's error, one line, as for NameValidationException.
                from .runner import transition_failed
                return transition_failed(self, transition.__name__.removeprefix('on_'),
                                         ' '.join(str(err).split(', at ')[0].split()))
            self.transition_exception = err
            self.get_logger().error(f'{transition.__name__}: {type(err).__name__}: {err}\n'
                                    + ''.join(traceback.format_exception(err)))
            raise
    run.__name__ = transition.__name__
    run.__doc__ = transition.__doc__
    return run


_Made = TypeVar('_Made')


def configured(value: _Made | None, node: str) -> _Made:
    """``value``, which a lifecycle node makes on configure: a RuntimeError
    naming ``node`` when a callback reads it before (a bug, counted by the
    guard like any other)."""
    if value is None:
        raise RuntimeError(f'{node} is not configured')
    return value


class CallbackGuard:
    """Mixin for ``rclpy.node.Node`` and ``LifecycleNode`` (list it first)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in _TRANSITIONS:
            if name in cls.__dict__:
                setattr(cls, name, _remembering(cls.__dict__[name]))

    def _guard_init(self) -> None:
        if not hasattr(self, 'callback_errors'):
            self.callback_errors: Counter[tuple[str, str]] = Counter()

    def _guarded(self, fn: Callable[..., Any], what: str, service: bool = False) -> Callable[..., Any]:
        self._guard_init()

        def guarded(*args: Any) -> Any:
            lock = getattr(self, '_callback_lock', None) or contextlib.nullcontext()
            try:
                with lock:
                    return fn(*args)
            except Exception as err:     # the node boundary: count, log once per cause, go on
                key = (what, type(err).__name__)
                self.callback_errors[key] += 1
                if self.callback_errors[key] == 1:
                    where = traceback.extract_tb(err.__traceback__)[-1]
                    self.get_logger().error(  # type: ignore[attr-defined]
                        f'{what}: {type(err).__name__}: {err} (at {where.filename}:{where.lineno}); the node '
                        f'keeps running, further {type(err).__name__} errors here are only counted')
                if service and len(args) >= 2:
                    response = args[1]
                    if hasattr(response, 'success'):
                        response.success = False
                    if hasattr(response, 'message'):
                        response.message = f'internal error: {type(err).__name__}: {err}'
                    return response
                return None
        # The executor ledger names a timer by its function: the guarded one's, not this wrapper's.  Not
        # functools.wraps: its __wrapped__ would change the signature rclpy inspects to decide what to pass.
        guarded.__qualname__ = getattr(fn, '__qualname__', guarded.__qualname__)
        return guarded

    def create_subscription(self, msg_type: Any, topic: str, callback: Callable[..., Any], *args: Any,
                            **kwargs: Any) -> Any:
        return super().create_subscription(  # type: ignore[misc]
            msg_type, topic, self._guarded(callback, f'subscription {topic}'), *args, **kwargs)

    def create_timer(self, timer_period_sec: float, callback: Callable[..., Any] | None, *args: Any,
                     **kwargs: Any) -> Any:
        name = getattr(callback, '__name__', 'timer')
        return super().create_timer(  # type: ignore[misc]
            timer_period_sec, None if callback is None else self._guarded(callback, f'timer {name}'), *args, **kwargs)

    def destroy_timer(self, timer: Any) -> bool:
        # rclpy keeps a weak reference to every timer in its callback group and never drops it:
        # timers made and destroyed over a long run would grow that set without bound.
        group = getattr(timer, 'callback_group', None)
        if group is not None:
            group.entities.discard(weakref.ref(timer))
        destroyed: bool = super().destroy_timer(timer)  # type: ignore[misc]
        return destroyed

    def create_service(self, srv_type: Any, srv_name: str, callback: Callable[..., Any], *args: Any,
                       **kwargs: Any) -> Any:
        return super().create_service(  # type: ignore[misc]
            srv_type, srv_name, self._guarded(callback, f'service {srv_name}', service=True), *args, **kwargs)

    def error_summary(self) -> dict[str, int]:
        """``'callback: ExceptionType'`` → count."""
        self._guard_init()
        return {f'{what}: {kind}': n for (what, kind), n in sorted(self.callback_errors.items())}
