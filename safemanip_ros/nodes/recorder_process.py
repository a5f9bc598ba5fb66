"""The recorder as a process of its own beside ``safemanip run``'s stack, as
``ros2 bag record`` runs beside a launch.

The recorder's writer is pure Python (rosbags): each 1 MiB MCAP chunk it
flushes holds the interpreter for milliseconds, and in the stack's process
the monitor's frame thread waited for that lock.  In a process of its own
the writer shares nothing with the control path but the machine, and DDS
delivers every message to it as to any other subscriber.

:class:`RecorderProcess` starts ``python -m safemanip_ros.nodes.recorder_node``
(autostarted, normal scheduling, its own session so a terminal's Ctrl-C
reaches only the stack, which stops it last), holds its output until it is
up so a failed start-up is one line, waits until it and each of the
stack's publishers it records have matched each other (nothing the stack
publishes after activation is missed), and on stop sends SIGTERM (taken as
Ctrl-C, and silent while it is still importing) and waits for the bag to be
closed with every split listed.  Should the stack die, even by SIGKILL, the
recorder gets SIGTERM (``SAFEMANIP_PARENT_PID``, :func:`.runner.bind_to_parent`)
and closes its bag the same way.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import IO, Any

from ..errors import SafemanipError

READY_ENV = 'SAFEMANIP_RECORDER_READY'
"""Set (to 1) in the recorder's environment: once configured it prints
:data:`READY_PREFIX` and the topics it records, resolved, on one line."""
READY_PREFIX = 'safemanip-recorder-ready:'
MATCHED_PREFIX = 'safemanip-recorder-matched:'
"""Printed once each topic named on the recorder's standard input (one line)
has a publisher matched, or, after a time, followed by those that have not."""
PARENT_ENV = 'SAFEMANIP_PARENT_PID'
"""The stack's process id, in the recorder's environment (:func:`.runner.bind_to_parent`)."""
NODE_NAME = 'recorder'


class RecorderProcess:
    """One recorder child process; :meth:`start` it, then
    :meth:`wait_matched`, then :meth:`stop` (or :meth:`discard` when the
    stack itself did not come up)."""

    def __init__(self, proc: subprocess.Popen[bytes], out: IO[str],
                 on_early_exit: Callable[[int], None] | None) -> None:
        self.proc = proc
        self._out = out
        self._on_early_exit = on_early_exit
        self._lock = threading.Lock()
        self._held: list[str] | None = []       # output kept until released (None: streamed)
        self._discarding = False
        self._stopping = False
        self.ended_early: int | None = None     # its exit code, when it ended while the stack ran
        self.topics: list[str] | None = None    # resolved names, once the recorder said it is ready
        self._ready = threading.Event()
        self._matched = threading.Event()
        self.matched_problem: str | None = None  # topics the recorder saw no publisher of, in time
        self._started = time.monotonic()
        self._reader = threading.Thread(target=self._forward, name='recorder-output', daemon=True)

    @classmethod
    def start(cls, ros_args: list[str], out: IO[str] = sys.stderr,
              on_early_exit: Callable[[int], None] | None = None) -> 'RecorderProcess':
        """Start the recorder node with ``ros_args`` (``['--ros-args', ...]``)
        and ``autostart`` on.  Call it before the stack takes real-time
        scheduling: a child inherits its parent's policy."""
        env = {k: v for k, v in os.environ.items() if k != 'SAFEMANIP_REALTIME_PRIORITY'}
        env.update({READY_ENV: '1', PARENT_ENV: str(os.getpid()), 'PYTHONUNBUFFERED': '1'})
        args = list(ros_args) or ['--ros-args']
        proc = subprocess.Popen([sys.executable, '-m', 'safemanip_ros.nodes.recorder_node', *args,
                                 '-p', 'autostart:=true'], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True)
        rec = cls(proc, out, on_early_exit)
        rec._reader.start()
        return rec

    # ------------------------------------------------------------------ output
    def _forward(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode('utf-8', 'replace')
            if line.startswith(READY_PREFIX):
                self.topics = line[len(READY_PREFIX):].split()
                self._ready.set()
                continue
            if line.startswith(MATCHED_PREFIX):
                self.matched_problem = ' '.join(line[len(MATCHED_PREFIX):].split()) or None
                self._matched.set()
                continue
            with self._lock:
                if self._held is not None:
                    self._held.append(line)
                    continue
                if self._discarding:
                    continue
            self._write(line)
        code = self.proc.wait()
        self._ready.set()              # whoever waits for it learns it ended
        self._matched.set()
        with self._lock:
            running = self._held is None and not self._discarding and not self._stopping
        if running:                    # (while starting, wait_matched reports it)
            self.ended_early = code
            if self._on_early_exit is not None:
                self._on_early_exit(code)

    def _write(self, text: str) -> None:
        try:
            self._out.write(text)
            self._out.flush()
        except (OSError, ValueError):  # the stack's stderr closed: nothing to show it on
            pass

    def release(self) -> None:
        """Show the output held so far, and stream the rest."""
        with self._lock:
            held, self._held = self._held or [], None
        self._write(''.join(held))

    def _startup_failure(self, code: int) -> Exception:
        self._reader.join(timeout=5.0)   # its last lines
        with self._lock:
            held, self._held = self._held or [], None
        errors = [line.strip() for line in held if line.startswith(f'{NODE_NAME}: error: ')]
        if code == 2 and errors:
            why = errors[-1].removeprefix(f'{NODE_NAME}: error: ')
            return SafemanipError(why if why.startswith(f'{NODE_NAME}:') else f'{NODE_NAME}: {why}')
        self._write(''.join(held))
        return RuntimeError(f'the recorder process exited with {code} while starting (its output is above)')

    # --------------------------------------------------------------- start-up
    def wait_matched(self, publishers: Iterable[Any], timeout_s: float = 60.0,
                     cancelled: Callable[[], bool] = lambda: False) -> list[str] | None:
        """Wait until the recorder is configured and matched both ways with
        each of ``publishers`` (rclpy publishers of the stack) on a topic it
        records: each publisher has matched a subscription, and the recorder's
        subscription to its topic has matched a publisher (a reader drops
        what a writer it does not know yet sends; DDS discovery runs each
        way on its own).  Returns those topics, or None as soon as
        ``cancelled()`` (Ctrl-C meanwhile).  A recorder that exits meanwhile
        raises its one-line error (SafemanipError, exit 2) or, if it
        crashed, a RuntimeError; one that takes longer than ``timeout_s``
        raises a SafemanipError naming what was not matched."""
        deadline = time.monotonic() + timeout_s
        if not self._wait(self._ready, deadline, cancelled):
            return None
        if self.topics is None:
            raise self._startup_failure(self.proc.wait())
        recorded = set(self.topics)
        pending = [p for p in publishers if p.topic_name in recorded]
        topics = sorted({p.topic_name for p in pending})
        assert self.proc.stdin is not None
        try:                            # the topics the recorder waits to have a publisher matched on
            self.proc.stdin.write((' '.join(topics) + '\n').encode())
            self.proc.stdin.flush()
        except OSError:                 # it ended: said below
            pass
        if not self._wait(self._matched, deadline, cancelled):
            return None
        code = self.proc.poll()
        if code is not None:
            raise self._startup_failure(code)
        if self.matched_problem is not None:
            raise SafemanipError(f'the recorder process did not match {self.matched_problem} within '
                                 f'{timeout_s:.0f} s')
        while pending:
            if cancelled():
                return None
            code = self.proc.poll()
            if code is not None:
                raise self._startup_failure(code)
            pending = [p for p in pending if p.get_subscription_count() < 1]
            if pending and time.monotonic() > deadline:
                raise SafemanipError(f'the recorder process did not subscribe to '
                                     f'{", ".join(sorted({p.topic_name for p in pending}))} within {timeout_s:.0f} s')
            time.sleep(0.02)
        return topics

    def _wait(self, event: threading.Event, deadline: float, cancelled: Callable[[], bool]) -> bool:
        """Wait for ``event`` (False if cancelled first); the recorder's
        end or ``deadline`` passing raise as :meth:`wait_matched` says."""
        while not event.wait(timeout=0.05):
            if cancelled():
                return False
            code = self.proc.poll()
            if code is not None:
                self._reader.join(timeout=5.0)
                if event.is_set():
                    break
                raise self._startup_failure(code)
            if time.monotonic() > deadline:
                raise SafemanipError('the recorder process did not come up within '
                                     f'{deadline - self._started:.0f} s')
        return True

    # ------------------------------------------------------------------- stop
    def stop(self, timeout_s: float = 60.0) -> int:
        """SIGTERM, then wait until the recorder closed its bag (SIGKILL after
        ``timeout_s``); its exit code."""
        self._stopping = True
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()   # a recorder still waiting for the stack's topics stops waiting
            except OSError:
                pass
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)   # as SIGINT, and no traceback while it imports
        try:
            code = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._reader.join(timeout=5.0)
        if not self._discarding:
            self.release()             # stopped while starting: what it said, its bag's closing among it
        return code

    def discard(self) -> None:
        """Stop it without showing its output: the stack did not come up,
        and its own error is the one line the user sees."""
        with self._lock:
            self._held, self._discarding = None, True
        self.stop(timeout_s=10.0)
