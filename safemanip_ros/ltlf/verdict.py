"""The four-valued verdict of a trace prefix (SEMANTICS.md §2)."""

from __future__ import annotations

import enum


class Verdict(enum.IntEnum):
    """Verdict of a prefix π₀…π_t for a formula φ.

    ``TRUE``: every finite extension (including none) satisfies φ.
    ``FALSE``: no finite extension satisfies φ.
    ``PRESUMABLY_TRUE``: neither, and the prefix itself satisfies φ.
    ``PRESUMABLY_FALSE``: neither, and the prefix itself does not satisfy φ.

    The integer values are the ones carried by our ``Verdict`` ROS message.
    """

    FALSE = 0
    TRUE = 1
    PRESUMABLY_FALSE = 2
    PRESUMABLY_TRUE = 3

    @property
    def text(self) -> str:
        """The lower-case name used in JSON output (``presumably_true`` …)."""
        return self.name.lower()

    @classmethod
    def from_text(cls, text: str) -> 'Verdict':
        return cls[text.upper()]

    @property
    def accepting(self) -> bool:
        """Whether the prefix itself satisfies the formula."""
        return self in (Verdict.TRUE, Verdict.PRESUMABLY_TRUE)

    @property
    def final(self) -> bool:
        """Whether no continuation can change the verdict."""
        return self in (Verdict.TRUE, Verdict.FALSE)
