"""Text from outside (topic data, service answers, file contents) made safe
for a terminal: anyone who can publish on a topic must not be able to clear,
recolour or fake the operator's screen with control characters."""

from __future__ import annotations

__all__ = ['printable']


def printable(text: object) -> str:
    """``text`` as a string with every non-printable character (C0/C1
    controls such as ESC, DEL, bidirectional overrides, line and paragraph
    separators) written as its Python escape, e.g. ``'\\x1b[2J'`` becomes
    ``'\\\\x1b[2J'``; printable text, spaces included, is returned as it is."""
    s = str(text)
    if s.isprintable():
        return s
    return ''.join(c if c.isprintable() else repr(c)[1:-1] for c in s)
