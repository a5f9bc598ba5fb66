"""One writer per state file: a second process given the same file is
refused, instead of both keeping half the rollouts and saying nothing."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from .errors import SafemanipError

__all__ = ['StateLock', 'StateLockError']


class StateLockError(SafemanipError):
    """The state file is held by another process (names the file and, where known, the holder)."""


class StateLock:
    """An exclusive ``flock`` on ``<state>.lock`` beside ``state``, held for
    the rest of the process (the kernel releases it when the process ends,
    however it ends); the holder's pid is written into the lock file for the
    message.

    Raises:
        StateLockError: another process holds it, or the lock file cannot be made.
    """

    def __init__(self, state: Path) -> None:
        self.path = state.with_name(state.name + '.lock')
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise StateLockError(f'{state}: cannot make its lock file {self.path} ({err.strerror})') from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(self._fd, 32).decode(errors='replace').strip()
            os.close(self._fd)
            raise StateLockError(f'{state} is in use by another gate{f" (pid {holder})" if holder.isdigit() else ""}; '
                                 'give each gate a state file of its own') from None
        os.ftruncate(self._fd, 0)
        os.write(self._fd, f'{os.getpid()}\n'.encode())
