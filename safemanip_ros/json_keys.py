"""JSON objects whose keys are unique: Python's decoder keeps the last value
of a repeated key, a silent choice a safety tool must not make for its
inputs (traces, reports, bag metadata)."""

from __future__ import annotations

from typing import Any


class RepeatedKeyError(ValueError):
    """A JSON object names ``key`` twice."""

    def __init__(self, key: str) -> None:
        super().__init__(f'{key!r} is given twice in one object')
        self.key = key


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for :func:`json.loads`: the object as a dict,
    or :class:`RepeatedKeyError` naming the first repeated key."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise RepeatedKeyError(key)
            seen.add(key)
    return out
