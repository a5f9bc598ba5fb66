"""A small declarative validator for our YAML files (JSON-Schema-like).

A schema is a :class:`Field` tree; :func:`validate` walks a loaded document
and raises :class:`~safemanip_ros.errors.SpecError` naming ``file:line``, the
dotted field path and what was expected.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import SpecError
from .yamlio import Located, LocatedList


@dataclass(frozen=True)
class Field:
    """Expected shape of a value.

    kind: 'str', 'int', 'float', 'bool', 'map' (fixed keys), 'dict' (any str
    keys, values per ``values``), 'list' (items per ``items``), 'any'.
    """

    kind: str
    required: bool = False
    keys: dict[str, 'Field'] = field(default_factory=dict)
    values: 'Field | None' = None
    items: 'Field | None' = None
    choices: tuple[Any, ...] | None = None
    minimum: float | None = None
    check: Callable[[Any], str | None] | None = None
    doc: str = ''


_TYPES: dict[str, type | tuple[type, ...]] = {'str': str, 'int': int, 'float': (int, float), 'bool': bool, 'map': dict, 'dict': dict, 'list': list}
_NAMES = {'str': 'a string', 'int': 'an integer', 'float': 'a number', 'bool': 'true or false',
          'map': 'a mapping', 'dict': 'a mapping', 'list': 'a list'}


def validate(value: Any, schema: Field, where: str, path: str) -> None:
    """Raise SpecError at the first problem (every required field a mapping lacks counts as one);
    ``where`` is 'file:line'."""
    if schema.kind == 'any':
        return
    expected = _TYPES[schema.kind]
    ok = isinstance(value, expected) and not (schema.kind in ('int', 'float') and isinstance(value, bool))
    if not ok:
        raise SpecError(f'{_loc(where, path)}: expected {_NAMES[schema.kind]}, got {_describe(value)}')
    if schema.kind == 'float' and not math.isfinite(value):
        raise SpecError(f'{_loc(where, path)}: must be a finite number, got {value}')
    if schema.choices is not None and value not in schema.choices:
        raise SpecError(f'{_loc(where, path)}: {value!r} is not one of {list(schema.choices)}')
    if schema.minimum is not None and value < schema.minimum:
        raise SpecError(f'{_loc(where, path)}: must be >= {schema.minimum}, got {value}')
    if schema.kind == 'map':
        for key in value:
            if key not in schema.keys:
                raise SpecError(f'{_loc(_at(value, key, where), path)}: unknown field {key!r} '
                                f'(allowed: {", ".join(sorted(schema.keys))})')
        missing = [key for key, sub in schema.keys.items() if sub.required and key not in value]
        if missing:     # all of them at once: a user fixing a file should not meet them one run at a time
            raise SpecError(f'{_loc(where, path)}: missing required field{"s" if len(missing) > 1 else ""} '
                            + ', '.join(map(repr, missing)))
        for key, sub in schema.keys.items():
            if key in value:
                validate(value[key], sub, _at(value, key, where), f'{path}.{key}' if path else key)
    elif schema.kind == 'dict' and schema.values is not None:
        for key, item in value.items():
            if not isinstance(key, str):
                raise SpecError(f'{_loc(_at(value, key, where), path)}: keys must be strings, got {key!r}')
            validate(item, schema.values, _at(value, key, where), f'{path}.{key}')
    elif schema.kind == 'list' and schema.items is not None:
        for i, item in enumerate(value):
            line = value.where(i) if isinstance(value, LocatedList) else where
            validate(item, schema.items, line, f'{path}[{i}]')
    # Last, on a value whose parts passed their own schemas (a cross-field check may rely on them).
    if schema.check is not None:
        problem = schema.check(value)
        if problem:
            raise SpecError(f'{_loc(where, path)}: {problem}')


def _loc(where: str, path: str) -> str:
    """'file:line: field.path', or 'file:line' for the document itself (its path is empty)."""
    return f'{where}: {path}' if path else where


def _at(mapping: Any, key: Any, default: str) -> str:
    return mapping.where(str(key)) if isinstance(mapping, Located) else default


def _describe(value: Any) -> str:
    if value is None:
        return 'nothing (null)'
    # The YAML loader's own containers (Located, LocatedList) by the names a user knows.
    kind = 'a list' if isinstance(value, list) else 'a mapping' if isinstance(value, dict) else type(value).__name__
    return f'{kind} {value!r}'[:80]
