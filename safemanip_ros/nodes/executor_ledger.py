"""What an executor's thread did between two moments: the callbacks it ran
(each by name: a subscription's topic, a timer's function) and how long,
and how long it spent in the executor's own wait (idle, or building the
wait set rclpy builds for each wake-up).

A monitor tick that comes late was kept from its thread by the callbacks
before it, by the executor itself, or by the machine (the thread waited for
a CPU or the GIL: its CPU time then falls short of the wall time).  The
monitor's overrun line for a late tick says which, from the
:class:`CallbackLedger` of a :class:`LedgerExecutor` (:meth:`CallbackLedger.take`
at each tick).  The ledger is pure; the executor only times what rclpy's
``SingleThreadedExecutor`` does, and does it unchanged.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rclpy.executors import (
    ConditionReachedException,
    ShutdownException,
    SingleThreadedExecutor,
    TimeoutException,
)


@dataclass
class CallbackLedger:
    """Callbacks run and time waited since the last :meth:`take` (seconds)."""

    callbacks: int = 0
    callbacks_s: float = 0.0
    longest_s: float = 0.0
    longest: str = ''
    waited_s: float = 0.0
    waiting_cpu_s: float = 0.0          # of the waits, on a CPU: the executor's own work (building wait sets)
    _by_name_s: dict[str, float] = field(default_factory=dict, repr=False)

    def ran(self, name: str, took_s: float) -> None:
        """A callback named ``name`` ran for ``took_s``."""
        self.callbacks += 1
        self.callbacks_s += took_s
        self._by_name_s[name] = self._by_name_s.get(name, 0.0) + took_s
        if took_s > self.longest_s:
            self.longest_s, self.longest = took_s, name

    def waited(self, took_s: float, cpu_s: float = 0.0) -> None:
        """The executor waited (or prepared its wait) for ``took_s``, of
        which ``cpu_s`` on a CPU."""
        self.waited_s += took_s
        self.waiting_cpu_s += cpu_s

    def take(self) -> 'CallbackLedger':
        """What was noted since the last take (this ledger starts afresh)."""
        out = CallbackLedger(self.callbacks, self.callbacks_s, self.longest_s, self.longest, self.waited_s,
                             self.waiting_cpu_s, self._by_name_s)
        self.callbacks, self.callbacks_s, self.longest_s, self.longest = 0, 0.0, 0.0, ''
        self.waited_s = self.waiting_cpu_s = 0.0
        self._by_name_s = {}
        return out

    def said(self, names: int = 3) -> str:
        """``7 callback(s) 12.0 ms (/tf 6.1, MonitorNode._build_frames 4.0, /joint_states 1.2; the longest
        one /tf 3.2 ms), the executor's waits 2.9 ms (on a CPU 0.8)``: the ``names`` costliest names'
        totals; a wait's time on a CPU is the executor's own work."""
        waits = f'the executor\'s waits {self.waited_s * 1e3:.1f} ms (on a CPU {self.waiting_cpu_s * 1e3:.1f})'
        if not self.callbacks:
            return f'no callbacks, {waits}'
        top = sorted(self._by_name_s.items(), key=lambda kv: -kv[1])[:names]
        parts = ', '.join(f'{name} {s * 1e3:.1f}' for name, s in top)
        return (f'{self.callbacks} callback(s) {self.callbacks_s * 1e3:.1f} ms ({parts}; the longest one '
                f'{self.longest} {self.longest_s * 1e3:.1f} ms), {waits}')


def callback_name(entity: Any) -> str:
    """A subscription's topic, a timer's function (``Class.method``), else the entity's type."""
    topic = getattr(entity, 'topic_name', None)
    if topic:
        return str(topic)
    callback = getattr(entity, 'callback', None)
    name = getattr(callback, '__qualname__', None)
    return str(name) if name else type(entity).__name__


class LedgerExecutor(SingleThreadedExecutor):
    """rclpy's ``SingleThreadedExecutor`` that notes in :attr:`ledger` each
    callback it runs and each wait it makes (four clock reads a callback)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ledger = CallbackLedger()

    def _spin_once_impl(self, timeout_sec: Any = None, wait_condition: Any = lambda: False) -> None:
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            handler, entity, _node = self.wait_for_ready_callbacks(timeout_sec, None, wait_condition)
        except (ShutdownException, TimeoutException, ConditionReachedException):
            self.ledger.waited(time.perf_counter() - t0, time.thread_time() - c0)
            return
        t1 = time.perf_counter()
        self.ledger.waited(t1 - t0, time.thread_time() - c0)
        try:
            handler()
        finally:
            self.ledger.ran(callback_name(entity), time.perf_counter() - t1)
        exception = handler.exception()
        if exception is not None:
            raise exception
        handler.result()
