"""What the live benches share about the stack they start in a process of
its own: its CPU time and memory from ``/proc``, and stopping it as Ctrl-C
would (so it closes its bag)."""

from __future__ import annotations

import os
import signal
import subprocess


def proc_stats(pid: int) -> tuple[float, float]:
    """(CPU seconds used, RSS MiB) of a process, from /proc."""
    with open(f'/proc/{pid}/stat') as fh:
        fields = fh.read().rsplit(')', 1)[1].split()
    cpu_s = (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')
    rss_mib = 0.0
    with open(f'/proc/{pid}/status') as fh:
        for line in fh:
            if line.startswith('VmRSS:'):
                rss_mib = int(line.split()[1]) / 1024
    return cpu_s, rss_mib


def children(pid: int) -> list[int]:
    """The processes ``pid`` started and that still run (``safemanip run``'s recorder)."""
    try:
        with open(f'/proc/{pid}/task/{pid}/children') as fh:
            return [int(c) for c in fh.read().split()]
    except OSError:
        return []


def stop_stack(node, stack: subprocess.Popen, timeout_s: float = 30.0) -> None:
    """Take this script's node down, then SIGINT the stack and wait (kill past ``timeout_s``)."""
    import rclpy
    node.destroy_node()
    rclpy.try_shutdown()
    stack.send_signal(signal.SIGINT)
    try:
        stack.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stack.kill()
