"""Who may act through Foxglove: the operator credential, per connection.

Foxglove's WebSocket protocol has no login of its own, so the stack's
operator actions (acknowledge, resume, start and end a rollout) are
refused to every connection until it calls the ``login`` service with the
credential configured for the stack.  Without a credential configured the
server is read-only: no action service is offered at all.

The credential is a file the operator keeps (like an SSH key): one line of
at least :data:`MIN_CREDENTIAL_CHARS` characters, readable by its owner
only.  Pure: no rclpy, no Foxglove SDK.

Example::

    >>> access = OperatorAccess('correct horse battery staple')
    >>> access.allows(7), access.login(7, 'guess'), access.login(7, 'correct horse battery staple')
    (False, False, True)
    >>> access.allows(7), access.allows(8)
    (True, False)
"""

from __future__ import annotations

import hmac
import stat
from pathlib import Path

from ..errors import FoxgloveError

__all__ = ['MIN_CREDENTIAL_CHARS', 'OperatorAccess', 'load_credential']

MIN_CREDENTIAL_CHARS = 16
"""The shortest credential taken (a guessable one protects no arm)."""
MAX_CREDENTIAL_CHARS = 4096


def load_credential(path: str | Path) -> str:
    """The credential in ``path``: one line, at least
    :data:`MIN_CREDENTIAL_CHARS` characters, the file readable by its owner
    only; else a FoxgloveError naming the file and the problem."""
    p = Path(path)
    try:
        info = p.stat()
        if not stat.S_ISREG(info.st_mode):
            raise FoxgloveError(f'{p}: the operator credential must be a file')
        if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise FoxgloveError(f'{p}: the operator credential is readable by others (mode '
                              f'{stat.S_IMODE(info.st_mode):o}); chmod 600 it')
        if info.st_size > MAX_CREDENTIAL_CHARS + 2:
            raise FoxgloveError(f'{p}: not a credential ({info.st_size} bytes; one line expected)')
        text = p.read_text(encoding='utf-8')
    except OSError as err:
        raise FoxgloveError(f'{p}: cannot read the operator credential ({err.strerror})') from None
    except UnicodeDecodeError:
        raise FoxgloveError(f'{p}: the operator credential is not UTF-8 text') from None
    lines = text.splitlines()
    secret = lines[0].strip() if lines else ''
    if len(lines) > 1 and any(line.strip() for line in lines[1:]):
        raise FoxgloveError(f'{p}: the operator credential must be one line')
    if len(secret) < MIN_CREDENTIAL_CHARS:
        raise FoxgloveError(f'{p}: the operator credential is shorter than {MIN_CREDENTIAL_CHARS} characters')
    return secret


class OperatorAccess:
    """Connections (by the server's client id) that presented the
    credential.  ``credential`` None: nobody may act (read-only)."""

    def __init__(self, credential: str | None) -> None:
        self._credential = None if credential is None else credential.encode('utf-8')
        self._allowed: set[int] = set()

    @property
    def read_only(self) -> bool:
        return self._credential is None

    def login(self, client_id: int, presented: str) -> bool:
        """Whether ``presented`` is the credential (compared in constant
        time); if so, connection ``client_id`` may act from now on."""
        ok = self._credential is not None and hmac.compare_digest(presented.encode('utf-8'), self._credential)
        if ok:
            self._allowed.add(client_id)
        return ok

    def allows(self, client_id: int) -> bool:
        return client_id in self._allowed

    def forget(self, client_id: int) -> None:
        """The connection closed: its client id may be given to another."""
        self._allowed.discard(client_id)

