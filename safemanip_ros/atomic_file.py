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
        with os.fdopen(fd, 'w') as fh:
            for chunk in chunks:
                fh.write(chunk)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
