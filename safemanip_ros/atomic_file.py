"""Writing a file so that readers see the old content or the new, never part of it."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path


def write_text_atomically(path: Path, chunks: Iterable[str]) -> None:
    """``path``'s new text, the concatenation of ``chunks``, written to a
    temporary file beside it (``.<name>.*.tmp``) that then replaces it
    (``os.replace``, atomic on POSIX).  Its folder is created if missing.
    A file killed half written (a crash, Ctrl-C, a full disk) leaves the
    old ``path`` in place and no temporary file behind; the error propagates.
    ``chunks`` may be a generator: a large file is never one string."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f'.{path.name}.', suffix='.tmp')
    try:
        # mkstemp makes the file 0600; the result is an ordinary file, readable as the umask allows (0644 usually).
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, 'w') as fh:
            for chunk in chunks:
                fh.write(chunk)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    """The process's umask: from /proc (Linux) without touching it, else by
    setting it and restoring it at once."""
    try:
        for line in Path('/proc/self/status').read_text().splitlines():
            if line.startswith('Umask:'):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
