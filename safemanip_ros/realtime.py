"""Real-time scheduling for the control path, as ros2_control's controller
manager does it: ``SCHED_FIFO`` at a chosen priority and memory locked, where
the operating system permits; one clear warning and normal scheduling where
it does not.

A verdict or a hold that arrives late is wrong, and on a loaded machine the
ordinary scheduler shares the CPU with whatever else runs: a busy process
delays the monitor's tick and the supervisor's hold by hundreds of
milliseconds.  Under ``SCHED_FIFO`` the stack's threads preempt every
normally scheduled thread.

Linux applies a scheduling policy per thread and a new thread inherits its
creator's: :func:`enable_realtime` is called before ROS starts, so the DDS
threads, the executors and the supervisor's thread all run real-time.
Background work that must never compete with them (the bag writer, alert
sinks) calls :func:`background_thread` when it starts.  The kernel's
real-time throttling (``/proc/sys/kernel/sched_rt_runtime_us``, 95 % by
default) still leaves the rest of the machine some CPU if a real-time
thread spins.

Permission: root, ``CAP_SYS_NICE``, or an ``rtprio`` limit at least the
priority (``/etc/security/limits.conf``: ``@realtime - rtprio 98`` and
``@realtime - memlock unlimited``, as the ROS 2 real-time guide sets up).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
import sys
import threading
from dataclasses import dataclass, field

PRIORITY_RANGE = (1, 98)
"""SCHED_FIFO priorities we accept (99 is left to the kernel's own watchdogs)."""
DEFAULT_PRIORITY = 50
_MCL_CURRENT, _MCL_FUTURE = 1, 2


@dataclass
class RealtimeState:
    """What :func:`enable_realtime` achieved."""

    scheduled: bool = False         # SCHED_FIFO in effect for the calling thread (and its future threads)
    priority: int = 0
    memory_locked: bool = False
    warnings: list[str] = field(default_factory=list)


_STATE = RealtimeState()


def enable_realtime(priority: int = DEFAULT_PRIORITY, lock_memory: bool = True) -> RealtimeState:
    """Put the calling thread under ``SCHED_FIFO`` at ``priority`` and lock
    the process's memory (``mlockall(MCL_CURRENT | MCL_FUTURE)``: no page
    fault on the control path).  A priority outside :data:`PRIORITY_RANGE`
    is a ValueError; a missing permission is not an error: it is said in
    the returned warnings and the thread keeps normal scheduling."""
    lo, hi = PRIORITY_RANGE
    if not lo <= priority <= hi:
        raise ValueError(f'real-time priority {priority}: expected {lo} to {hi}')
    state = RealtimeState(priority=priority)
    if not sys.platform.startswith('linux'):
        state.warnings.append(f'real-time scheduling is only set up on Linux (this is {sys.platform}); '
                              f'running at normal priority')
        return _remember(state)
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
        state.scheduled = True
    except OSError as exc:
        state.warnings.append(f'SCHED_FIFO priority {priority} not permitted ({exc.strerror}); running at normal '
                              f'priority: give the user CAP_SYS_NICE or an rtprio limit of at least {priority} '
                              f'(/etc/security/limits.conf)')
    if lock_memory:
        if _libc().mlockall(_MCL_CURRENT | _MCL_FUTURE) == 0:
            state.memory_locked = True
        else:
            err = ctypes.get_errno()
            state.warnings.append(f'memory not locked ({os.strerror(err)}): page faults may delay the control '
                                  f'path; raise the memlock limit (ulimit -l unlimited)')
    return _remember(state)


def announce(state: RealtimeState, program: str, source: str) -> None:
    """What :func:`enable_realtime` did, in one format wherever it was asked
    for (``safemanip run --realtime``, ``SAFEMANIP_REALTIME_PRIORITY`` of a
    node's executable): each warning on stderr as ``PROGRAM: warning:
    real-time (SOURCE): ...``, and the scheduling in effect on stdout."""
    for warning in state.warnings:
        print(f'{program}: warning: real-time ({source}): {warning}', file=sys.stderr, flush=True)
    if state.scheduled:
        print(f'{program}: real-time ({source}): SCHED_FIFO priority {state.priority}'
              f'{", memory locked" if state.memory_locked else ""}', flush=True)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library('c') or 'libc.so.6', use_errno=True)


def _remember(state: RealtimeState) -> RealtimeState:
    global _STATE
    _STATE = state
    return state


def background_thread() -> None:
    """Called first in a thread that does background work (writing a bag,
    sending alerts): back to normal scheduling, so it never competes with
    the real-time control path (nothing to do where real-time was not
    enabled).  The thread also gets its Python name as its system name
    (first 15 bytes), so ``top -H`` and ``/proc`` show which it is."""
    if sys.platform.startswith('linux'):
        _PR_SET_NAME = 15
        _libc().prctl(_PR_SET_NAME, threading.current_thread().name.encode()[:15], 0, 0, 0)
    if _STATE.scheduled:
        try:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        except OSError:
            pass            # lowering one's own priority is always permitted; nothing else to do


def settle_heap() -> None:
    """Called once the nodes are up, and again when the monitor's properties
    are built anew: the objects alive now (the nodes, compiled automata, the
    monitor's tables and kept messages) leave the cyclic garbage collector's
    passes (``gc.freeze``).  They live until the next rebuild, yet a full pass
    traverses every one of them, tens of milliseconds for a stack of a
    thousand property instances, paid by whichever frame it falls in.
    Reference counting still frees any of them that is dropped; what was
    frozen before is thawed first, so a replaced monitor caught in a
    reference cycle is collected here, not kept for the life of the process."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def thread_policies(pid: int) -> dict[str, tuple[int, int]]:
    """(policy, real-time priority) of every thread of process ``pid``, by
    thread name (``name:tid``), from ``/proc`` (for tests and doctor)."""
    out = {}
    for tid in os.listdir(f'/proc/{pid}/task'):
        try:
            with open(f'/proc/{pid}/task/{tid}/comm') as fh:
                name = fh.read().strip()
            with open(f'/proc/{pid}/task/{tid}/stat') as fh:
                fields = fh.read().rsplit(')', 1)[1].split()
        except OSError:
            continue            # the thread ended meanwhile
        # stat fields after the name: index 37 is rt_priority, 38 policy (proc(5), counted from field 3)
        out[f'{name}:{tid}'] = (int(fields[38]), int(fields[37]))
    return out
