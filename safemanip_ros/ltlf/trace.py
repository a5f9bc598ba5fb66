"""The one reader of trace files (``check``, ``monitor-trace``, ``audit``,
``trace_player``): one set of rules, one error type, errors that name
``file:line``.

Formats (one JSON value per line; blank lines skipped):

* a **frame** per line: an object ``{"name": true | false | null}``;
  ``null`` means *unknown*.  A name a frame does not mention is unknown for
  that frame (``check``, which evaluates plain LTLf, reads it as false).
* a **step** per line (SpecRLBench style): a list of the names that are
  true; every other name is false in that step.
* a **batch**: one whole trace per line, a JSON array of frames or steps.

A file is a batch when its first line is an array whose items are all
objects or arrays.  A name outside ``known`` (when given) is an error that
lists the known names, unless ``allow_unknown`` is set (then it is ignored).
Every problem raises :class:`~safemanip_ros.errors.TraceError`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Collection, Iterator

from ..errors import TraceError
from ..json_keys import RepeatedKeyError, unique_keys

Step = frozenset[str]
"""The atoms true in one step of a plain LTLf trace (``check``)."""

Values = dict[str, 'bool | None']


@dataclass(frozen=True)
class Frame:
    """One step of a trace: the values it gives (``None`` = unknown) and
    whether names it does not mention are false (a step list) or unknown
    (a frame object)."""

    values: Values
    closed: bool

    def value(self, name: str) -> bool | None:
        """``True``/``False``, or ``None`` when unknown."""
        if name in self.values:
            return self.values[name]
        return False if self.closed else None

    def true_atoms(self) -> Step:
        return frozenset(n for n, v in self.values.items() if v)


@dataclass(frozen=True)
class Trace:
    """One trace of a file: ``name`` (the file name, ``file:line`` in a
    batch), the line it starts on, and its frames."""

    name: str
    line: int
    frames: list[Frame]


_BOOL_OR_NULL = frozenset({bool, type(None)})
_STR = frozenset({str})


def _parse(value: object, where: str, known: frozenset[str] | None, allow_unknown: bool) -> Frame:
    # The checks run over the types present (C loops); the Python loops below only name what failed.
    if isinstance(value, dict):
        if not _BOOL_OR_NULL.issuperset(map(type, value.values())):
            for name, v in value.items():
                if v is not None and not isinstance(v, bool):
                    raise TraceError(f'{where}: value of {name!r} must be true, false or null, got {json.dumps(v)}')
        frame = Frame(dict(value), closed=False)
    elif isinstance(value, list):
        if not _STR.issuperset(map(type, value)):
            for name in value:
                if not isinstance(name, str):
                    raise TraceError(f'{where}: a step list must hold names (strings), got {json.dumps(name)}')
        frame = Frame(dict.fromkeys(value, True), closed=True)
    else:
        raise TraceError(f'{where}: a step must be a JSON object {{"name": true}} or a list of true names, '
                         f'got {type(value).__name__}')
    if known is not None and not known.issuperset(frame.values):
        strange = [n for n in frame.values if n not in known]
        if not allow_unknown:
            raise TraceError(f'{where}: unknown predicate {strange[0]!r}; known predicates: '
                             f'{", ".join(sorted(known)) or "none"} (--allow-unknown-predicates ignores it)')
        frame = Frame({n: v for n, v in frame.values.items() if n in known}, frame.closed)
    return frame


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    try:
        with open(path, encoding='utf-8-sig') as fh:
            for number, line in enumerate(fh, start=1):
                if line.strip():
                    yield number, line
    except OSError as err:
        raise TraceError(f'{path}: cannot read trace file: {err.strerror or err}') from err
    except UnicodeDecodeError as err:
        raise TraceError(f'{path}: not UTF-8 text ({err.reason} at byte {err.start})') from err


def _objects_keys(value: object) -> int:
    """How many keys the step objects of a decoded line hold."""
    if isinstance(value, dict):
        return len(value)
    return sum(len(s) for s in value if isinstance(s, dict)) if isinstance(value, list) else 0


def _decode(path: Path, number: int, line: str) -> object:
    """One line's JSON value.  A step naming a predicate twice is an error
    (which of its values holds?), not the last one silently: a line whose
    ``":`` count differs from its objects' keys (a repeat, or spacing
    before a colon) is decoded again, checking every object's keys."""
    try:
        value = json.loads(line)
        if line.count('":') != _objects_keys(value):
            value = json.loads(line, object_pairs_hook=unique_keys)
        return value
    except RepeatedKeyError as err:
        raise TraceError(f'{path}:{number}: {err.key!r} is given twice in one step') from err
    except json.JSONDecodeError as err:
        raise TraceError(f'{path}:{number}: invalid JSON: {err.msg} at column {err.colno}') from err
    except RecursionError as err:
        raise TraceError(f'{path}:{number}: JSON nested too deeply') from err


def _is_batch_line(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(s, (list, dict)) for s in value)


def read_traces(path: str | Path, known: Collection[str] | None = None,
                allow_unknown: bool = False) -> list[Trace]:
    """Every trace of a file (one, or one per line of a batch)."""
    path = Path(path)
    lines = list(_lines(path))
    if not lines:
        raise TraceError(f'{path}: empty trace (LTLf traces have at least one step)')
    known_set = None if known is None else frozenset(known)
    first = _decode(path, *lines[0])
    if _is_batch_line(first):
        out = []
        for n, line in lines:
            value = first if n == lines[0][0] else _decode(path, n, line)
            if not isinstance(value, list):
                raise TraceError(f'{path}:{n}: a batch line must be a JSON array of steps, got '
                                 f'{type(value).__name__}')
            if not value:
                raise TraceError(f'{path}:{n}: empty trace (LTLf traces have at least one step)')
            out.append(Trace(f'{path.name}:{n}', n, [_parse(s, f'{path}:{n} step {i}', known_set, allow_unknown)
                                                     for i, s in enumerate(value)]))
        return out
    frames = [_parse(first, f'{path}:{lines[0][0]}', known_set, allow_unknown)]
    frames += [_parse(_decode(path, n, line), f'{path}:{n}', known_set, allow_unknown) for n, line in lines[1:]]
    return [Trace(path.name, lines[0][0], frames)]


_LIST = frozenset({list})


def read_step_lists(path: str | Path, known: Collection[str] | None = None,
                    allow_unknown: bool = False) -> list[list[str]] | None:
    """The commonest trace file, fast: one trace, a step list per line, every
    name known (or ignored under ``allow_unknown``).  Returns each step's
    true names, what :func:`read_traces` gives for that file (its frames'
    names, in order), or ``None`` for any other file or any problem (read
    it with :func:`read_traces`, which names the file, line and problem).

    All lines are decoded by one ``json.loads`` of ``[line\\n,line...]``,
    not one call and one :class:`Frame` per line.
    That reads the same values only if no value spans lines and none
    shares one, which is checked: every line starts with ``[`` and ends
    with ``]`` (after JSON whitespace), the values are flat lists of
    strings, and there are as many as lines.  A flat list that spans lines
    would put a string, comma or ``]`` first on its next line, never ``[``
    (a string cannot hold a line break), so each line holds whole values;
    as many values as lines leaves one per line."""
    try:
        text = Path(path).read_text(encoding='utf-8-sig')
    except (OSError, UnicodeDecodeError):
        return None
    # Blank lines skipped, as _lines does; JSON whitespace (only) stripped from the others.
    lines = [line.strip(' \t\r') for line in text.split('\n') if line.strip()]
    joined = '\n'.join(lines)          # each line starts with [ and ends with ]: counted, not looped over
    n = len(lines)
    if not n or joined[:1] != '[' or joined[-1:] != ']' or joined.count('\n[') != n - 1 or joined.count(']\n') != n - 1:
        return None
    try:
        steps: list[list[str]] = json.loads('[' + joined.replace('\n', '\n,') + ']')
    except (ValueError, RecursionError):
        return None
    if len(steps) != n or not _LIST.issuperset(map(type, steps)):
        return None
    known_set = None if known is None else frozenset(known)
    try:        # every name known: all are strings (known names are), no other check needed
        if known_set is not None and known_set.issuperset(chain.from_iterable(steps)):
            return steps
    except TypeError:           # a list or object among the names (unhashable)
        return None
    if not _STR.issuperset(map(type, chain.from_iterable(steps))):
        return None
    if known_set is not None:
        if not allow_unknown:
            return None
        steps = [[name for name in step if name in known_set] for step in steps]
    return steps


def _check_given(traces: list[Trace], path: Path, reads: Collection[str]) -> None:
    """Frames as objects name what they give; an atom the formula reads and
    no frame of the file names is most likely a typo, which would read as
    false: a TraceError.  Step lists name every atom (the others are false)."""
    frames = [frame for trace in traces for frame in trace.frames]
    if not reads or any(frame.closed for frame in frames):
        return
    given = frozenset(chain.from_iterable(frame.values for frame in frames))
    absent = [a for a in reads if a not in given]
    if absent:
        raise TraceError(f'{path}: the formula reads {absent[0]!r}, which no step of the trace gives; the trace '
                         f'gives: {", ".join(sorted(given)) or "nothing"} (--absent-false reads it as false)')


def _atoms(trace: Trace, path: Path) -> list[Step]:
    steps = []
    for i, frame in enumerate(trace.frames):
        unknown = [n for n, v in frame.values.items() if v is None]
        if unknown:
            raise TraceError(f'{path}:{trace.line + (0 if ":" in trace.name else i)}: {unknown[0]!r} is null '
                             f'(unknown); check evaluates plain LTLf and needs true or false')
        steps.append(frame.true_atoms())
    return steps


def read_trace(path: str | Path, reads: Collection[str] = ()) -> list[Step]:
    """One plain LTLf trace (``check``): the true atoms of each step; names a
    step does not mention are false.  In a trace of frame objects, an atom of
    ``reads`` that no frame mentions is an error (a step list names every
    atom: the ones it leaves out are false)."""
    path = Path(path)
    traces = read_traces(path)
    if len(traces) != 1 or ':' in traces[0].name:
        raise TraceError(f'{path}: a batch file (one trace per line); use --batch')
    _check_given(traces, path, reads)
    return _atoms(traces[0], path)


def read_step_traces(path: str | Path, reads: Collection[str] = ()) -> list[list[Step]]:
    """Every trace of a file as plain LTLf steps: one trace, or one per line
    of a batch (``reads`` as in :func:`read_trace`, over the whole file)."""
    path = Path(path)
    traces = read_traces(path)
    _check_given(traces, path, reads)
    return [_atoms(trace, path) for trace in traces]


def read_batch(path: str | Path, reads: Collection[str] = ()) -> Iterator[list[Step]]:
    """Traces of a batch file, one JSON array of steps per line, in order
    (``reads`` as in :func:`read_trace`, over the whole file)."""
    path = Path(path)
    traces = read_traces(path)
    _check_given(traces, path, reads)
    for trace in traces:
        if ':' not in trace.name:
            raise TraceError(f'{path}:{trace.line}: a batch line must be a JSON array of steps')
        yield _atoms(trace, path)
