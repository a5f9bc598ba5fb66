"""Derived predicates as a vectorised dataflow program (SEMANTICS.md §3).

Every grounded predicate, sub-expression, device output and trigger edge is
a *column* ``c`` of a boolean frame matrix stored column-major as ``V[c, b]``
(``b``: rollout in the batch), so gathering a column for every rollout is
one contiguous copy.  Columns are computed level by level (a column's level is one
more than its inputs'); within a level, all gates of one kind and all devices
of one kind are evaluated with a single numpy operation over every rollout.
Devices keep their state in per-group arrays, so one :class:`Program` steps
one frame of ``B`` independent rollouts at a time, the same for live (``B=1``)
and offline batches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from ..ltlf import formula as fm
from ..ltlf.formula import Formula
from ..spec.expressions import DeviceSpec

FALSE_COL, TRUE_COL = 0, 1
_GATES = ('not', 'and', 'or', 'eq')


@dataclass
class _Node:
    op: str                    # 'input', 'const', gate, or device kind
    inputs: tuple[int, ...]
    window: int = 0
    level: int = 0


@dataclass
class _Group:
    """All nodes of one op at one level."""

    op: str
    out: np.ndarray            # column indices
    a: np.ndarray              # first input column per node
    b: np.ndarray | None       # second input column (binary ops)
    window: np.ndarray | None  # int64 windows (devices)
    state: dict[str, np.ndarray] = field(default_factory=dict)


class Program:
    """Columns: 0 = false, 1 = true, then the grounded predicates in order,
    then computed columns.  ``index`` maps every predicate and derived name to
    its column."""

    def __init__(self, predicates: list[str], derived: dict[str, DeviceSpec]) -> None:
        self.predicates = list(predicates)
        self.nodes: list[_Node] = [_Node('const', ()), _Node('const', ())]
        self.index: dict[str, int] = {}
        for p in self.predicates:
            self.index[p] = len(self.nodes)
            self.nodes.append(_Node('input', ()))
        self.num_inputs = len(self.nodes)
        self._derived = derived
        self._expr_memo: dict[Formula, int] = {}
        self._gate_memo: dict[tuple[object, ...], int] = {}
        self._resolving: set[str] = set()
        for name in sorted(derived):
            self.column_of_name(name)
        self.groups: list[_Group] = []
        self.batch = 0

    # ------------------------------------------------------------- building
    def column_of_name(self, name: str) -> int:
        col = self.index.get(name)
        if col is not None:
            return col
        spec = self._derived.get(name)
        if spec is None:
            raise KeyError(f'unknown predicate {name!r}; known: {sorted(set(self.index) | set(self._derived))}')
        if name in self._resolving:
            raise ValueError(f'derived predicate {name!r} depends on itself')
        self._resolving.add(name)
        if spec.kind == 'expr':
            col = self.column_of(spec.args[0])
        else:
            ins = tuple(self.column_of(a) for a in spec.args)
            col = self._add(spec.kind, ins, spec.window_frames, memo=False)
        self._resolving.discard(name)
        self.index[name] = col
        return col

    def column_of(self, f: Formula) -> int:
        """Column computing the propositional formula ``f``."""
        col = self._expr_memo.get(f)
        if col is not None:
            return col
        op = f.op
        if op == fm.TRUE:
            col = TRUE_COL
        elif op == fm.FALSE:
            col = FALSE_COL
        elif op == fm.ATOM:
            col = self.column_of_name(f.name)
        elif op == fm.NOT:
            col = self._add('not', (self.column_of(f.args[0]),))
        elif op in (fm.AND, fm.OR):
            col = self._add('and' if op == fm.AND else 'or', (self.column_of(f.args[0]), self.column_of(f.args[1])))
        elif op == fm.IMPLIES:
            col = self._add('or', (self._add('not', (self.column_of(f.args[0]),)), self.column_of(f.args[1])))
        elif op == fm.IFF:
            col = self._add('eq', (self.column_of(f.args[0]), self.column_of(f.args[1])))
        else:
            raise ValueError(f'temporal operator {op!r} where a propositional expression is required: {f}')
        self._expr_memo[f] = col
        return col

    def rose_of(self, f: Formula) -> int:
        """Column of ``rose(f)`` (shared between identical expressions)."""
        return self._add('rose', (self.column_of(f),))

    def _add(self, op: str, inputs: tuple[int, ...], window: int = 0, memo: bool = True) -> int:
        key = (op, inputs, window)
        if memo:
            col = self._gate_memo.get(key)
            if col is not None:
                return col
        level = 1 + max((self.nodes[i].level for i in inputs), default=0)
        col = len(self.nodes)
        self.nodes.append(_Node(op, inputs, window, level))
        if memo:
            self._gate_memo[key] = col
        return col

    def finalize(self, batch: int) -> None:
        """Freeze the node list into level-ordered groups for ``batch`` rollouts."""
        self.batch = batch
        by_key: dict[tuple[int, str], list[int]] = {}
        for col, node in enumerate(self.nodes):
            if node.op in ('const', 'input'):
                continue
            by_key.setdefault((node.level, node.op), []).append(col)
        self.groups = []
        for (_, op), cols in sorted(by_key.items()):
            nodes = [self.nodes[c] for c in cols]
            a = np.array([n.inputs[0] for n in nodes], dtype=np.intp)
            b = np.array([n.inputs[1] for n in nodes], dtype=np.intp) if len(nodes[0].inputs) > 1 else None
            window = np.array([n.window for n in nodes], dtype=np.int64)[:, None]
            self.groups.append(_Group(op, np.array(cols, dtype=np.intp), a, b, window))
        self.reset()

    @property
    def num_columns(self) -> int:
        return len(self.nodes)

    # ------------------------------------------------------------- running
    def reset(self, which: np.ndarray | None = None, batch: int | None = None) -> None:
        """Device states back to 'before frame 0' (``p(-1) = false``), for
        all rollouts or those in ``which``; ``batch`` changes the number of
        rollouts (all are reset)."""
        if batch is not None:
            self.batch, which = batch, None
        for g in self.groups:
            shape = (g.out.size, self.batch)
            init_by_op: dict[str, dict[str, np.ndarray]] = {
                'rose': {'prev': np.zeros(shape, bool)},
                'fell': {'prev': np.zeros(shape, bool)},
                'held': {'count': np.zeros(shape, np.int64)},
                # frames since p was last true; window means "never" (output false)
                'sticky': {'since': np.broadcast_to(_window(g), shape).copy()} if g.window is not None else {},
                'debounce': {'out': np.zeros(shape, bool), 'count': np.zeros(shape, np.int64)},
                'latch': {'out': np.zeros(shape, bool)},
                'timeout': {'armed': np.zeros(shape, bool), 'count': np.zeros(shape, np.int64)},
                'restarting_timeout': {'armed': np.zeros(shape, bool), 'count': np.zeros(shape, np.int64)},
                'restarting_pulse': {'armed': np.zeros(shape, bool), 'count': np.zeros(shape, np.int64)},
            }
            init = init_by_op.get(g.op)
            if init is None:
                continue
            if which is None or not g.state:
                g.state = init
            else:
                for key, arr in init.items():
                    g.state[key][:, which] = arr[:, which]

    def new_frame_matrix(self) -> np.ndarray:
        """A column-major frame matrix ``bool[C, B]`` with the constants set."""
        v = np.zeros((self.num_columns, self.batch), dtype=bool)
        v[TRUE_COL] = True
        return v

    def evaluate(self, v: np.ndarray) -> np.ndarray:
        """Fill the computed columns of ``v`` (``bool[C, B]``, inputs already
        set) for one frame, advancing device states.  Returns ``v``."""
        for g in self.groups:
            x = v[g.a]
            op = g.op
            if op == 'not':
                out = ~x
            elif op == 'and':
                out = x & v[g.b]
            elif op == 'or':
                out = x | v[g.b]
            elif op == 'eq':
                out = x == v[g.b]
            elif op == 'rose':
                s = g.state
                out = x & ~s['prev']
                s['prev'] = x
            elif op == 'fell':
                s = g.state
                out = ~x & s['prev']
                s['prev'] = x
            elif op == 'held':
                s = g.state
                count = np.where(x, np.minimum(s['count'] + 1, _window(g)), 0)
                s['count'] = count
                out = count >= _window(g)
            elif op == 'sticky':
                s = g.state
                since = np.where(x, 0, np.minimum(s['since'] + 1, _window(g)))
                s['since'] = since
                out = since < _window(g)
            elif op == 'debounce':
                s = g.state
                differs = x != s['out']
                count = np.where(differs, s['count'] + 1, 0)
                switch = count >= _window(g)
                s['out'] = np.where(switch, x, s['out'])
                s['count'] = np.where(switch, 0, count)
                out = s['out']
            elif op == 'latch':
                s = g.state
                out = ~v[g.b] & (x | s['out'])
                s['out'] = out
            elif op == 'timeout':
                s = g.state
                stop = v[g.b]
                armed, count = s['armed'], s['count']
                disarm = armed & stop
                tick = armed & ~stop
                arm = ~armed & x & ~stop
                count = np.where(tick, np.minimum(count + 1, _window(g)), np.where(arm, 0, count))
                out = (tick & (count >= _window(g))) | (arm & (_window(g) == 0))
                s['armed'] = (armed & ~disarm) | arm
                s['count'] = count
            elif op in ('restarting_timeout', 'restarting_pulse'):
                s = g.state
                stop = v[g.b]
                count = np.where(x, 0, np.where(s['armed'], np.minimum(s['count'] + 1, _window(g)), s['count']))
                armed = x | s['armed']
                out = armed & ~stop & (count >= _window(g))
                # A stop ends the watch; the pulse also ends as it fires.
                s['armed'] = armed & ~stop & ~out if op == 'restarting_pulse' else armed & ~stop
                s['count'] = count
            else:  # pragma: no cover - finalize only creates the ops above
                raise AssertionError(op)
            v[g.out] = out
        return v

    def evaluate_over_time(self, V: np.ndarray) -> np.ndarray:
        """Fill the computed columns of ``V`` (``bool[C, B, T]``, inputs
        already set; time last, so a column's frames are contiguous) for
        frames ``0..T-1`` from the reset state: the same values as
        ``reset()`` then ``evaluate(V[..., t])`` for each ``t``, a group for
        all frames at once.  Each device has a closed form over time: rose/fell
        a shift, held and sticky an and/or over each frame's window (by
        doubling, :func:`_over_windows`), latch whether its last set came
        after its last reset (one running maximum, :func:`_set_last`),
        debounce the same for the ends of ``window``-frame runs of true and
        of false, timeout a latch ``window`` frames back and no stop since
        (:meth:`_timeout_over_time`), the restarting timers a latch and the
        frames since the last start (:meth:`_restarting_over_time`).  Device
        states are left as they were (call :meth:`reset` before stepping
        again).  Returns ``V``."""
        T = V.shape[-1]
        # Frame indices (broadcast over the last axis) in the narrowest type that holds the event
        # codes of _set_last (up to 2T + 2): the running maxima are memory-bound.
        itype = np.int16 if 2 * T + 2 < 2 ** 15 else np.int32 if 2 * T + 2 < 2 ** 31 else np.int64
        idx = np.arange(T, dtype=itype)

        for g in self.groups:
            x = V[g.a]
            op = g.op
            if op == 'not':
                out = ~x
            elif op == 'and':
                out = x & V[g.b]
            elif op == 'or':
                out = x | V[g.b]
            elif op == 'eq':
                out = x == V[g.b]
            elif op in ('rose', 'fell'):
                prev = np.zeros_like(x)
                prev[..., 1:] = x[..., :-1]
                out = x & ~prev if op == 'rose' else ~x & prev
            elif op == 'held':       # true on each of the last `window` frames
                out = _over_windows(x, g, np.logical_and)
            elif op == 'sticky':     # true on one of the last `window` frames
                out = _over_windows(x, g, np.logical_or)
            elif op == 'debounce':   # the value of the last run that lasted `window` frames (else false)
                out = _set_last(_over_windows(x, g, np.logical_and), _over_windows(~x, g, np.logical_and), idx)
            elif op == 'latch':      # the last set against the last reset (a reset wins its frame)
                out = _set_last(x, V[g.b], idx)
            elif op == 'timeout':
                out = self._timeout_over_time(x, V[g.b], idx, g)
            elif op in ('restarting_timeout', 'restarting_pulse'):
                out = self._restarting_over_time(x, V[g.b], idx, g, pulse=op == 'restarting_pulse')
            else:  # pragma: no cover - finalize only creates the ops above
                raise AssertionError(op)
            V[g.out] = out
        return V

    @staticmethod
    def _timeout_over_time(x: np.ndarray, stop: np.ndarray, idx: np.ndarray, g: '_Group') -> np.ndarray:
        """``timeout`` from the reset state over all frames (as :meth:`evaluate`).

        The device is armed after a frame exactly when ``latch(x, stop)``
        is: an ``x`` frame without stop arms it, a stop disarms it, and
        nothing else changes it.  An armed device counts from the frame
        that armed it, so the output at ``t`` is: armed after frame
        ``t - window`` and no stop on the ``window`` frames after it (for
        ``window = 0``: armed after ``t``)."""
        armed = _set_last(x, stop, idx)
        calm = _over_windows(~stop, g, np.logical_and)        # no stop on the last `window` frames
        T = x.shape[-1]
        out = np.zeros_like(x)
        for w, rows in _window_rows(g):
            if w == 0:
                out[rows] = armed[rows]
            elif w < T:
                out[rows, ..., w:] = armed[rows, ..., :T - w] & calm[rows, ..., w:]
        return out

    @staticmethod
    def _restarting_over_time(x: np.ndarray, stop: np.ndarray, idx: np.ndarray, g: '_Group',
                              pulse: bool) -> np.ndarray:
        """``restarting_timeout``/``restarting_pulse`` from the reset state
        over all frames (as :meth:`evaluate`).

        The watch is running after frame ``t`` exactly when ``latch(x,
        stop)`` is (a start opens it, a stop on any frame ends it, its own
        start frame included), and its count is the frames since the last
        start.  So the timeout is the latch with at least ``window`` frames
        since the last start; the pulse fires only when exactly ``window``
        have passed (it ends the watch as it fires, and only a new start
        opens it again)."""
        running = _set_last(x, stop, idx)
        last_start = np.where(x, idx, -1).astype(np.int64)
        np.maximum.accumulate(last_start, axis=-1, out=last_start)
        age = idx.astype(np.int64) - last_start
        out = np.zeros_like(x)
        for w, rows in _window_rows(g):
            out[rows] = running[rows] & ((age[rows] == w) if pulse else (age[rows] >= w))
        return out


def _set_last(set_: np.ndarray, reset: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Per frame (last axis), whether the last frame at or before it with
    ``set_`` or ``reset`` had ``set_`` and not ``reset`` (false when there
    was none): a latch.  One running maximum of event codes ``2t + 2`` for
    a reset at ``t`` and ``2t + 1`` for a set alone, so a later frame
    outranks an earlier one and a reset its own frame's set; the
    maximum's parity tells which came last (0: none)."""
    code: np.ndarray = np.multiply(reset, 2 * idx + 2, dtype=idx.dtype)
    code += np.multiply(set_ & ~reset, 2 * idx + 1, dtype=idx.dtype)
    np.maximum.accumulate(code, axis=-1, out=code)
    np.bitwise_and(code, 1, out=code)
    return code.astype(bool)


def _window_rows(g: '_Group') -> Iterator[tuple[int, slice | np.ndarray]]:
    """The distinct windows of a device group, each with the rows (first
    axis) that have it: a slice of every row when they all share it."""
    windows = _window(g)[:, 0]
    distinct = np.unique(windows)
    if distinct.size == 1:
        yield int(distinct[0]), slice(None)
        return
    for w in distinct.tolist():
        yield w, np.flatnonzero(windows == w)


def _over_windows(x: np.ndarray, g: '_Group', op: np.ufunc) -> np.ndarray:
    """Per frame (last axis), ``op`` (logical and/or) of ``x`` over the
    last ``window`` frames of its row (frames before 0 are false), for the
    windows of group ``g`` (``x`` is ``bool[n, ..., T]`` for its ``n``
    devices).  ``held`` is the and, ``sticky`` the or.

    By doubling: after a step of span ``s`` each frame holds ``op`` over
    its last ``s`` frames, and combining a frame with the one ``s`` before
    doubles that; the last step adds the remainder.  A few whole-array
    passes of elementwise ``op`` instead of a sequential scan over time."""
    T = x.shape[-1]
    out = np.zeros_like(x)
    for w, rows in _window_rows(g):
        y = x[rows]
        if w > T:
            if op is np.logical_and:
                continue              # never w true frames in a row: false throughout
            w = T                     # every earlier frame is within the window
        span = 1
        while span < w:
            step = min(span, w - span)
            z = np.empty_like(y)
            z[..., :step] = y[..., :step] if op is np.logical_or else False
            op(y[..., step:], y[..., :-step], out=z[..., step:])
            y, span = z, span + step
        out[rows] = y
    return out


def _window(g: '_Group') -> np.ndarray:
    """The int64 windows of a windowed device group (held, sticky, debounce, the timers)."""
    assert g.window is not None
    return g.window
