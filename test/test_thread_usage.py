"""What a thread used (safemanip_ros/thread_usage.py): its own work counts as
user time, a sleep as a wait and not as CPU time, and another thread's
work is not its own."""

from __future__ import annotations

import threading
import time

from safemanip_ros.thread_usage import ThreadUsage


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_work_is_user_time_and_a_sleep_a_wait():
    before = ThreadUsage.now()
    _spin(0.05)
    worked = ThreadUsage.now().since(before)
    assert worked.detailed       # Linux: per-thread usage
    # On a busy machine the spin may lose its CPU for a while: at least part of it is the thread's own.
    assert worked.user_s > 0.005 and worked.cpu_s >= worked.user_s

    before = ThreadUsage.now()
    time.sleep(0.05)
    slept = ThreadUsage.now().since(before)
    assert slept.voluntary_switches >= 1 and slept.cpu_s < 0.025


def test_another_threads_work_is_not_counted():
    before = ThreadUsage.now()
    other = threading.Thread(target=_spin, args=(0.1,))
    other.start()
    other.join()
    waited = ThreadUsage.now().since(before)
    assert waited.cpu_s < 0.05 and waited.voluntary_switches >= 1


def test_the_line_says_every_count():
    usage = ThreadUsage(0.002, 0.0158, 0.0178, 3, 0, 1, 2, True)
    assert usage.said() == ('on a CPU 17.8 ms (user 2.0, system 15.8; 3 page faults, 0 major; 1 waits, '
                            '2 preemptions)')
    assert ThreadUsage(cpu_s=0.001).said() == 'on a CPU 1.0 ms'
