"""Running one node as an executable: clean start-up errors, clean shutdown."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, TypeVar

import rclpy
from rclpy.clock import Clock, ClockType  # type: ignore[attr-defined]  # its own module only after Humble
from rclpy.duration import Duration
from rclpy.executors import Executor, ExternalShutdownException, SingleThreadedExecutor
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from ..errors import ParameterError, SafemanipError
from ..realtime import settle_heap
from .executor_ledger import LedgerExecutor
from .guard import created
from .params import unclaimed_parameters
from .recorder_process import PARENT_ENV

AnyNode = TypeVar('AnyNode', bound=Node)


def take_delivered(sub: Any, callback: Callable[[Any], None], limit: int = 10000) -> bool:
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


def run_node(factory: Callable[[], AnyNode], name: str, args: list[str] | None,
             until: Callable[[AnyNode], bool] | None = None, on_exit: Callable[[AnyNode], None] | None = None,
             claim_parameters: bool = True, beside: Callable[[], Node] | None = None) -> int:
    """Create the node and spin it until SIGINT or SIGTERM, a shutdown, or
    ``until(node)``; then ``on_exit(node)`` runs while the context is still
    up (:func:`initialised`).

    A configuration error at start-up is printed as one line and exits 2,
    a parameter given to the node that is not one of its own among them
    (:func:`.params.unclaimed_parameters`; ``claim_parameters=False`` where
    the arguments are another process's too, which checks them).
    With ``SAFEMANIP_REALTIME_PRIORITY`` set (the launch files' ``realtime_priority``)
    the node runs under SCHED_FIFO at that priority where permitted
    (:mod:`safemanip_ros.realtime`); with ``SAFEMANIP_PARENT_PID`` set, it
    stops as on SIGTERM when that process ends (:func:`bind_to_parent`).
    ``beside``: a second node (a Foxglove server) made after the first and
    spun on a thread of its own (:class:`SideThread`) while the first runs."""
    argv = list(sys.argv[1:] if args is None else args)
    if {'-h', '--help'} & set(argv[:argv.index('--ros-args')] if '--ros-args' in argv else argv):
        print_help(factory, name)
        return 0
    if not realtime_from_environment(name) or not bind_to_parent():
        return 2
    try:
        return _run_node(factory, name, args, until, on_exit, claim_parameters, beside)
    except RosArgumentsError as err:
        print(f'{name}: error: {err.one_line()}', file=sys.stderr)
        return 2


def print_help(factory: Callable[[], Any], name: str) -> None:
    """``NAME --help``: the node's module docstring (what it does, its
    parameters with their defaults), and how ROS arguments are given."""
    doc = (sys.modules.get(getattr(factory, '__module__', '')) or sys.modules[__name__]).__doc__ or ''
    print(doc.strip())
    print(f'\nusage: {name} --ros-args -p NAME:=VALUE [-p ...] [-r FROM:=TO] [--log-level LEVEL]')


def _run_node(factory: Callable[[], AnyNode], name: str, args: list[str] | None,
              until: Callable[[AnyNode], bool] | None, on_exit: Callable[[AnyNode], None] | None,
              claim_parameters: bool, beside: Callable[[], Node] | None = None) -> int:
    with initialised(args) as stop:
        made: list[Node] = []
        try:
            node = created(factory, name)
            made.append(node)
            if beside is not None:
                made.append(created(beside, name))
            unclaimed = unclaimed_parameters(made) if claim_parameters else []
            if unclaimed:       # a misspelt parameter would run the node with that parameter's default
                raise ParameterError('; '.join(unclaimed))
        except SafemanipError as err:
            for n in made:
                past_shutdown(n.destroy_node)
            print(f'{name}: error: {err.one_line()}', file=sys.stderr)
            rclpy.try_shutdown()
            return 2
        settle_heap()
        executor = LedgerExecutor()     # a monitor's late ticks say what the thread did meanwhile
        side = SideThread(made[1]).start() if len(made) > 1 else None
        try:
            executor.add_node(node)
            with shutdown_ends_it():
                while not stop.is_set() and rclpy.ok() and not (until is not None and until(node)):
                    executor.spin_once(timeout_sec=0.1)
        finally:
            if on_exit is not None:
                on_exit(node)
            if side is not None:
                side.stop()
            for n in made:
                past_shutdown(n.destroy_node)
            past_shutdown(executor.shutdown)
            past_shutdown(rclpy.try_shutdown)
    return 0


def realtime_from_environment(name: str) -> bool:
    """Apply ``SAFEMANIP_REALTIME_PRIORITY`` (unset, empty or 0: nothing) before
    ROS starts; False (after one line) when its value is not a priority."""
    from ..realtime import announce, enable_realtime
    value = os.environ.get('SAFEMANIP_REALTIME_PRIORITY', '').strip()
    if value in ('', '0'):
        return True
    try:
        state = enable_realtime(int(value))
    except ValueError as exc:
        print(f'{name}: error: SAFEMANIP_REALTIME_PRIORITY={value!r}: {exc}', file=sys.stderr)
        return False
    announce(state, name, 'SAFEMANIP_REALTIME_PRIORITY')
    return True


def bind_to_parent() -> bool:
    """With ``SAFEMANIP_PARENT_PID`` set (by ``safemanip run`` for its
    recorder), ask the kernel for SIGTERM when the parent ends, however it
    ends (``PR_SET_PDEATHSIG``): the child then closes as it would on
    Ctrl-C, instead of outliving a killed stack.  False when that parent is
    already gone (nothing to serve); True otherwise, also where the kernel
    call is missing (not Linux)."""
    value = os.environ.get(PARENT_ENV, '').strip()
    if not value.isdigit():
        return True
    try:
        import ctypes
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        return True
    return os.getppid() == int(value)     # checked after the request: a parent gone before it was missed


class RosArgumentsError(SafemanipError):
    """ROS arguments (``--ros-args ...``) that rcl cannot parse."""


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def initialised(args: list[str] | None) -> Iterator[threading.Event]:
    """``rclpy.init(args=args)``, with SIGINT and SIGTERM setting the event
    yielded instead of shutting rclpy down (the handlers before are restored
    after).  rclpy's own handlers shut every context down at once, inside
    the signal, so a node's last work — the recorder taking the messages
    already delivered to it, then closing its bag — found the context gone,
    and the events of a run's last moments were missing from its bag.  Spin
    loops check the event; a second signal interrupts (KeyboardInterrupt).
    Off the main thread, where Python takes no signals, rclpy keeps its
    handlers."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        _init(args)
        yield stop
        return

    def handler(signum: int, frame: object) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
    before = {s: signal.signal(s, handler) for s in _STOP_SIGNALS}
    try:
        _init(args, signal_handler_options=SignalHandlerOptions.NO)
        yield stop
    finally:
        for s, h in before.items():
            signal.signal(s, h)


def _init(args: list[str] | None, **options: object) -> None:
    """``rclpy.init``; ROS arguments that rcl cannot parse (``-p name:=[a:b]``
    is not YAML) are a user error naming the problem, not a traceback."""
    try:
        rclpy.init(args=args, **options)   # type: ignore[arg-type]
    except RuntimeError as exc:            # rclpy's RCLError
        text = ' '.join(str(exc).split())
        if 'failed to initialize rcl' not in text:
            raise
        raise RosArgumentsError(f'the ROS arguments do not parse: {text.split(", at ")[0]}') from None


def autostarted(factory: Callable[[], AnyNode]) -> Callable[[], AnyNode]:
    """Wrap a lifecycle node factory: with its ``autostart`` parameter true,
    the node configures and activates itself (no lifecycle manager needed),
    or the executable stops with the reason (:func:`bring_up`)."""
    def make() -> AnyNode:
        node = factory()
        if node.get_parameter('autostart').value:
            bring_up(node)
        return node
    return make


def transition_failed(node: Node, step: str, why: str) -> TransitionCallbackReturn:
    """A lifecycle transition's FAILURE: ``step failed: why`` logged, and
    ``why`` kept as ``node.transition_failure`` for :func:`bring_up` to report."""
    node.transition_failure = why          # type: ignore[attr-defined]
    node.get_logger().error(f'{step} failed: {why}')
    return TransitionCallbackReturn.FAILURE


def bring_up(node: Node, steps: tuple[str, ...] = ('configure', 'activate')) -> None:
    """Configure and activate a lifecycle node (or take only the ``steps``
    given), or raise a SafemanipError naming the node and why: a node that
    is not active must stop whoever started it (fail closed: no stack runs
    with its monitor off)."""
    for step in steps:
        result = getattr(node, f'trigger_{step}')()
        if result == TransitionCallbackReturn.SUCCESS:
            continue
        bug = getattr(node, 'transition_exception', None)
        if bug is not None:          # an exception in the node's own code: a bug, reported as one (exit 70)
            raise RuntimeError(f'{node.get_name()}: {step} raised {type(bug).__name__}: {bug}') from bug
        why = getattr(node, 'transition_failure', None) or f'{step} returned {result.name}'
        raise SafemanipError(f'{node.get_name()}: {step} failed: {why}')


def shut_down(wait_s: float = 2.0) -> bool:
    """Whether rclpy's default context is shut down, waiting up to
    ``wait_s`` for a shutdown under way: SIGINT's handler shuts the
    contexts down on a thread of its own, so an rcl call can fail on the
    shutdown just before ``rclpy.ok()`` turns false."""
    deadline = time.monotonic() + wait_s
    while rclpy.ok():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def past_shutdown(call: Callable[[], object]) -> None:
    """``call()`` (a teardown step: destroying a node, ``rclpy.try_shutdown``),
    its RuntimeError excused only once the context is shut down, or shutting
    down (:func:`shut_down`)."""
    try:
        call()
    except RuntimeError:
        if not shut_down():
            raise


@contextmanager
def shutdown_ends_it() -> Iterator[None]:
    """Spinning inside ends quietly on each way rclpy reports a shutdown:
    Ctrl-C, an external shutdown, and the bare RuntimeError rcl raises when
    SIGINT shuts the context down (on a thread of its own) while a spin is
    inside rcl or about to enter it — once the context is shut down
    (:func:`shut_down`).  Any other error propagates."""
    try:
        yield
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except RuntimeError:
        if not shut_down():
            raise


def spin_until_shutdown(executor: Executor, stop: threading.Event | None = None) -> None:
    """Spin ``executor`` until shutdown (or until ``stop`` is set); the ways
    rclpy reports a shutdown are not errors."""
    with shutdown_ends_it():
        if stop is None:
            executor.spin()
            return
        while not stop.is_set() and executor.context.ok():
            executor.spin_once(timeout_sec=0.1)


_Side = TypeVar('_Side', bound='SideThread')


class SideThread:
    """A node spun by an executor on a daemon thread of its own, from
    :meth:`start` (a Foxglove server beside the stack: its load stays off
    the frames' thread)."""

    def __init__(self, node: Node) -> None:
        self.executor = SingleThreadedExecutor(context=node.context)
        self.executor.add_node(node)
        self.thread = threading.Thread(target=spin_until_shutdown, args=(self.executor,),
                                       name=f'{node.get_name()}-executor', daemon=True)

    def start(self: _Side) -> _Side:
        self.thread.start()
        return self

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop spinning and join the thread (the node is left to its owner)."""
        self.executor.shutdown(timeout_sec=timeout_s / 2)
        self.thread.join(timeout=timeout_s)


class WatchdogThread(SideThread):
    """A node (the supervisor) on an executor and a thread of its own,
    watching the main executor's heartbeat: a 50 ms wall-clock timer on
    ``beat_node`` (steady time, so it runs under ``/clock`` sim time too)
    whose last turn is handed to ``node.watch_heartbeat(what, ...)``.  A
    stalled main executor then neither delays the watchdog nor goes
    unreported."""

    def __init__(self, node: Node, beat_node: Node, what: str) -> None:
        self._beat = time.monotonic()
        self.beat_timer = beat_node.create_timer(0.05, self._on_beat, clock=Clock(clock_type=ClockType.STEADY_TIME))
        node.watch_heartbeat(what, lambda: self._beat)   # type: ignore[attr-defined]
        super().__init__(node)

    def _on_beat(self) -> None:
        self._beat = time.monotonic()


def wait_acked(publishers: Iterable[Any], timeout_s: float = 2.0) -> None:
    """Wait (up to ``timeout_s`` in all) until every reliable publisher's
    messages are acknowledged by its matched subscriptions: what a process
    published last is in its subscribers' hands before it closes (a
    recorder told to stop, a gate's final decisions)."""
    deadline = time.monotonic() + timeout_s
    for pub in publishers:
        left_s = deadline - time.monotonic()
        if left_s <= 0:
            return
        try:
            pub.wait_for_all_acked(Duration(nanoseconds=int(left_s * 1e9)))
        except Exception:       # a publisher already destroyed, or a context shut down: nothing more to wait for
            continue
