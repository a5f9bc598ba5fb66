"""Reading traces of atom valuations (the ``safemanip check`` formats).

A *step* is either a JSON object ``{"atom": true, ...}`` (missing atoms are
false) or a JSON list of the atoms that are true (SpecRLBench style).  A
trace file has one step per line; a batch file has one whole trace (a JSON
array of steps) per line.  Blank lines are skipped.  Every problem raises
:class:`~safemanip_ros.errors.TraceError` naming the file and line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from ..errors import TraceError

Step = frozenset[str]


def parse_step(value: object, where: str) -> Step:
    """The set of true atoms of one step given as a decoded JSON value."""
    if isinstance(value, dict):
        true_atoms = []
        for name, v in value.items():
            if not isinstance(v, bool):
                raise TraceError(f'{where}: value of {name!r} must be true or false, got {json.dumps(v)}')
            if v:
                true_atoms.append(name)
        return frozenset(true_atoms)
    if isinstance(value, list):
        for name in value:
            if not isinstance(name, str):
                raise TraceError(f'{where}: a step list must hold atom names (strings), got {json.dumps(name)}')
        return frozenset(value)
    raise TraceError(f'{where}: a step must be a JSON object {{"atom": true}} or a list of true atoms, '
                     f'got {type(value).__name__}')


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    try:
        with open(path, encoding='utf-8') as fh:
            for number, line in enumerate(fh, start=1):
                if line.strip():
                    yield number, line
    except OSError as err:
        raise TraceError(f'{path}: cannot read trace file: {err.strerror or err}') from err
    except UnicodeDecodeError as err:
        raise TraceError(f'{path}: not UTF-8 text ({err.reason} at byte {err.start})') from err


def _decode(path: Path, number: int, line: str) -> object:
    try:
        return json.loads(line)
    except json.JSONDecodeError as err:
        raise TraceError(f'{path}:{number}: invalid JSON: {err.msg} at column {err.colno}') from err


def read_trace(path: str | Path) -> list[Step]:
    """One trace, one step per line."""
    path = Path(path)
    steps = [parse_step(_decode(path, n, line), f'{path}:{n}') for n, line in _lines(path)]
    if not steps:
        raise TraceError(f'{path}: empty trace (LTLf traces have at least one step)')
    return steps


def read_batch(path: str | Path) -> Iterator[list[Step]]:
    """Traces of a batch file, one JSON array of steps per line, in order."""
    path = Path(path)
    for n, line in _lines(path):
        value = _decode(path, n, line)
        if not isinstance(value, list):
            raise TraceError(f'{path}:{n}: a batch line must be a JSON array of steps, got {type(value).__name__}')
        if not value:
            raise TraceError(f'{path}:{n}: empty trace (LTLf traces have at least one step)')
        yield [parse_step(step, f'{path}:{n} step {i}') for i, step in enumerate(value)]
