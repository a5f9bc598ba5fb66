"""What the calling thread used of the machine over a stretch of time: CPU
time in user space and in the kernel, page faults and context switches
(``getrusage(RUSAGE_THREAD)``, Linux).

A frame that ran long either worked (its thread on a CPU all along), was
kept waiting (far less CPU time than wall time: the GIL, a lock, another
thread or process on its CPU — involuntary switches say the last), or made
the kernel work for it (system time: page faults, memory locked with
``MCL_FUTURE`` populated at each new mapping).  The monitor's overrun line
says which (:meth:`ThreadUsage.said`).
"""

from __future__ import annotations

import resource
import time
from dataclasses import dataclass

_RUSAGE_THREAD = getattr(resource, 'RUSAGE_THREAD', None)


@dataclass(frozen=True)
class ThreadUsage:
    """Counts of the calling thread; a difference of two (:meth:`since`) is
    what it used between them.  Where the system has no per-thread usage,
    only ``cpu_s`` is counted (``time.thread_time``)."""

    user_s: float = 0.0
    system_s: float = 0.0
    cpu_s: float = 0.0                  # user and system together
    minor_faults: int = 0               # pages mapped without reading a disk
    major_faults: int = 0               # pages read from a disk
    voluntary_switches: int = 0         # the thread waited (I/O, a lock, sleep)
    involuntary_switches: int = 0       # the kernel took its CPU for another
    detailed: bool = False

    @classmethod
    def now(cls) -> 'ThreadUsage':
        if _RUSAGE_THREAD is None:
            return cls(cpu_s=time.thread_time())
        u = resource.getrusage(_RUSAGE_THREAD)
        return cls(u.ru_utime, u.ru_stime, u.ru_utime + u.ru_stime, u.ru_minflt, u.ru_majflt, u.ru_nvcsw,
                   u.ru_nivcsw, True)

    def since(self, earlier: 'ThreadUsage') -> 'ThreadUsage':
        return ThreadUsage(self.user_s - earlier.user_s, self.system_s - earlier.system_s,
                           self.cpu_s - earlier.cpu_s, self.minor_faults - earlier.minor_faults,
                           self.major_faults - earlier.major_faults,
                           self.voluntary_switches - earlier.voluntary_switches,
                           self.involuntary_switches - earlier.involuntary_switches, self.detailed)

    def said(self) -> str:
        """``on a CPU 17.9 ms (user 2.1, system 15.8; 3 page faults, 0 major; 1 wait, 0 preemptions)``."""
        text = f'on a CPU {self.cpu_s * 1e3:.1f} ms'
        if self.detailed:
            text += (f' (user {self.user_s * 1e3:.1f}, system {self.system_s * 1e3:.1f}; {self.minor_faults} page '
                     f'faults, {self.major_faults} major; {self.voluntary_switches} waits, '
                     f'{self.involuntary_switches} preemptions)')
        return text
