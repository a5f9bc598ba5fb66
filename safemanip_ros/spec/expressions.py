"""Propositional expressions and smoothing devices (SEMANTICS.md §3).

Expressions use the LTLf syntax restricted to ``! & | -> <-> ( ) true
false`` over predicate names.  A derived predicate is either such an
expression or one device call:

    rose(EXPR)  fell(EXPR)  held(EXPR, k)  sticky(EXPR, k)  debounce(EXPR, k)
    latch(SET_EXPR, RESET_EXPR)  timeout(START_EXPR, STOP_EXPR, k)
    restarting_timeout(START_EXPR, STOP_EXPR, k)
    restarting_pulse(START_EXPR, STOP_EXPR, k)

with integer window ``k`` in frames (``k >= 1``; the timeouts allow 0).
The two restarting timers are SafeManip's settle watches (its compatibility
profile): every ``START`` frame restarts the count at 0, ``STOP`` ends the
watch, and the output is true from the frame the count reaches ``k`` —
until ``STOP`` or the next ``START`` (``restarting_timeout``), or on that
one frame only, the watch ending as it fires (``restarting_pulse``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import LtlfSyntaxError, SpecError
from ..ltlf import formula as fm
from ..ltlf.formula import Formula
from ..ltlf.parser import parse

DEVICE_ARITY = {  # kind → (number of expression arguments, has integer window)
    'rose': (1, False), 'fell': (1, False), 'held': (1, True), 'sticky': (1, True),
    'debounce': (1, True), 'latch': (2, False), 'timeout': (2, True),
    'restarting_timeout': (2, True), 'restarting_pulse': (2, True),
}
TIMERS = ('timeout', 'restarting_timeout', 'restarting_pulse')
"""Devices whose window may be 0 frames (and is rescaled down to 0)."""
_CALL = re.compile(r'\s*([a-z_]+)\s*\((.*)\)\s*\Z', re.S)


def parse_expression(text: str, where: str, offset: int = 0, full_text: str | None = None) -> Formula:
    """A propositional formula; temporal operators are rejected with their position."""
    full = text if full_text is None else full_text
    try:
        f = parse(text)
    except LtlfSyntaxError as err:
        raise SpecError(f'{where}: {err.message} at position {err.position + offset} of {full!r}') from err
    for sub in f.subformulas():
        if sub.op in fm.TEMPORAL_OPS:
            raise SpecError(f'{where}: temporal operator {sub.op!r} in {full!r}: derived predicates and '
                            f'triggers are propositional (use a device such as held() or timeout())')
    return f


@dataclass(frozen=True)
class DeviceSpec:
    """One derived predicate: ``kind`` is a device name or ``'expr'``."""

    kind: str
    args: tuple[Formula, ...]
    window_frames: int = 0

    @property
    def inputs(self) -> frozenset[str]:
        return frozenset().union(*(a.atoms for a in self.args))

    def __str__(self) -> str:
        if self.kind == 'expr':
            return str(self.args[0])
        parts = [str(a) for a in self.args]
        if DEVICE_ARITY[self.kind][1]:
            parts.append(str(self.window_frames))
        return f'{self.kind}({", ".join(parts)})'


def _split_args(body: str) -> list[tuple[str, int]]:
    """Top-level comma-separated arguments with their offsets in ``body``."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        if ch == '(':
            depth += 1
        elif ch == ')':
            depth -= 1
        elif ch == ',' and depth == 0:
            out.append((body[start:i], start))
            start = i + 1
    out.append((body[start:], start))
    return out


def parse_derived(text: str, where: str) -> DeviceSpec:
    """Parse a derived predicate definition (a device call or an expression)."""
    if not isinstance(text, str):
        raise SpecError(f'{where}: a derived predicate is a string such as "held(contact, 21)", got {text!r}')
    m = _CALL.match(text)
    if m is None or m.group(1) not in DEVICE_ARITY:
        if m is not None and not re.match(r'\s*(true|false)\b', text) and '&' not in text and '|' not in text:
            raise SpecError(f'{where}: unknown device {m.group(1)!r} in {text!r} '
                            f'(devices: {", ".join(sorted(DEVICE_ARITY))})')
        return DeviceSpec('expr', (parse_expression(text, where),))
    kind, body = m.group(1), m.group(2)
    n_expr, has_window = DEVICE_ARITY[kind]
    args = _split_args(body)
    expected = n_expr + (1 if has_window else 0)
    if len(args) != expected:
        shape = ', '.join(['EXPR'] * n_expr + (['k'] if has_window else []))
        raise SpecError(f'{where}: {kind}() takes {expected} argument(s) ({kind}({shape})), got {len(args)} in {text!r}')
    base = m.start(2)
    exprs = tuple(parse_expression(a, where, base + off, text) for a, off in args[:n_expr])
    window = 0
    if has_window:
        raw = args[-1][0].strip()
        if not re.fullmatch(r'\d+', raw):
            raise SpecError(f'{where}: {kind}() window must be a whole number of frames, got {raw!r} in {text!r}')
        window = int(raw)
        if window < (0 if kind in TIMERS else 1):
            raise SpecError(f'{where}: {kind}() window must be >= {0 if kind in TIMERS else 1} frames, got {window}')
    return DeviceSpec(kind, exprs, window)
