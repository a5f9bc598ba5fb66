"""Vectorised runtimes for compiled DFAs.

* :class:`StepTable` — one DFA as flat numpy arrays: a dense transition table
  ``table[state << k | letter]`` when its alphabet is small (``k`` atoms ≤
  :data:`TABLE_MAX_ATOMS`), else its decision diagram.  ``run`` steps a
  whole trace; long traces are split into chunks that run side by side for
  every possible start state, then stitched (exact, and independent of how
  the letters vary).
* :class:`DFABank` — many DFAs over one shared predicate vector, stepped
  together one frame at a time (live) or over a whole frame matrix (offline).

Letters are bit-packed: bit ``j`` is atom ``j`` of the DFA (``DFA.atoms``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ..errors import SafemanipError
from .dfa import DFA

TABLE_MAX_ATOMS = 12
LETTER_MAX_ATOMS = 63
"""Most atoms a letter holds (letters are int64)."""
"""Largest alphabet (atoms) given a dense table; larger ones walk the diagram."""

_LETTER_BITS = 20
"""Bank letters are computed as a float32 matrix product (exact below 2**24),
so a bank's dense tables may have at most this many atoms."""

_CHUNK_MIN_STEPS = 4096


def _diagram_targets(dfa: DFA, states: np.ndarray, letters: np.ndarray) -> np.ndarray:
    """Successors of ``states[i]`` on ``letters[i]`` by walking the diagram."""
    root = np.asarray(dfa.root, dtype=np.int64)
    if not dfa.node_atom:
        out: np.ndarray = ~root[states]
        return out
    atom = np.asarray(dfa.node_atom, dtype=np.int64)
    low = np.asarray(dfa.node_low, dtype=np.int64)
    high = np.asarray(dfa.node_high, dtype=np.int64)
    cur = root[states]
    letters = letters.astype(np.int64, copy=False)
    active = np.nonzero(cur >= 0)[0]
    while active.size:
        nodes = cur[active]
        bits = (letters[active] >> atom[nodes]) & 1
        cur[active] = np.where(bits == 1, high[nodes], low[nodes])
        active = active[cur[active] >= 0]
    result: np.ndarray = ~cur
    return result


@dataclass
class StepTable:
    """Array form of one DFA for fast stepping.

    Attributes:
        num_states, num_atoms: sizes.
        table: dense ``int32[num_states << num_atoms]`` or ``None``.
        accepting: ``bool[num_states]``; labels: ``int8[num_states]`` (Verdict values).
    """

    dfa: DFA
    num_states: int
    num_atoms: int
    table: np.ndarray | None
    accepting: np.ndarray
    labels: np.ndarray

    @classmethod
    def from_dfa(cls, dfa: DFA, max_table_atoms: int = TABLE_MAX_ATOMS) -> 'StepTable':
        k = len(dfa.atoms)
        if k > LETTER_MAX_ATOMS:
            raise SafemanipError(f'the formula reads {k} atoms; at most {LETTER_MAX_ATOMS} are supported (a letter is '
                                 f'one 64-bit word): split it into several properties')
        table = None
        if k <= max_table_atoms:
            width = 1 << k
            states = np.repeat(np.arange(dfa.num_states, dtype=np.int64), width)
            letters = np.tile(np.arange(width, dtype=np.int64), dfa.num_states)
            table = _diagram_targets(dfa, states, letters).astype(np.int32)
        return cls(dfa, dfa.num_states, k, table,
                   np.asarray(dfa.accepting, dtype=bool), np.asarray([int(v) for v in dfa.labels], dtype=np.int8))

    def step_many(self, states: np.ndarray, letters: np.ndarray) -> np.ndarray:
        """Element-wise successors (vectorised ``DFA.step``)."""
        if self.table is not None:
            out: np.ndarray = self.table[(states.astype(np.int64) << self.num_atoms) | letters]
            return out
        states, letters = np.broadcast_arrays(np.asarray(states, dtype=np.int64), np.asarray(letters, dtype=np.int64))
        flat = _diagram_targets(self.dfa, states.ravel(), letters.ravel())
        return flat.reshape(states.shape).astype(np.int32)

    def letters_from_matrix(self, values: np.ndarray) -> np.ndarray:
        """Bit-pack a ``bool[T, num_atoms]`` matrix (columns in ``dfa.atoms`` order)."""
        values = np.asarray(values, dtype=bool)
        if values.ndim != 2 or values.shape[1] != self.num_atoms:
            raise ValueError(f'expected a (T, {self.num_atoms}) matrix, got {values.shape}')
        weights = (np.int64(1) << np.arange(self.num_atoms, dtype=np.int64))
        return values.astype(np.int64) @ weights if self.num_atoms else np.zeros(len(values), np.int64)

    def run(self, letters: np.ndarray | Sequence[int], start: int | None = None) -> np.ndarray:
        """States after each letter (``int32[T]``), from ``start`` (default initial)."""
        letters = np.asarray(letters, dtype=np.int64)
        s0 = self.dfa.initial if start is None else start
        n = letters.size
        if n == 0:
            return np.zeros(0, dtype=np.int32)
        if n < _CHUNK_MIN_STEPS or self.num_states > 256:
            return self._run_sequential(letters, s0)
        return self._run_chunked(letters, s0)

    def _run_sequential(self, letters: np.ndarray, s0: int) -> np.ndarray:
        out = np.empty(letters.size, dtype=np.int32)
        s = s0
        if self.table is not None:
            table = self.table.tolist()
            k = self.num_atoms
            for i, letter in enumerate(letters.tolist()):
                s = table[(s << k) | letter]
                out[i] = s
        else:
            step = self.dfa.step
            for i, letter in enumerate(letters.tolist()):
                s = step(s, letter)
                out[i] = s
        return out

    def _run_chunked(self, letters: np.ndarray, s0: int) -> np.ndarray:
        # Split into C chunks of L letters; pass 1 runs every chunk from every
        # state at once to get each chunk's state map, the maps are chained
        # sequentially (C steps), pass 2 replays each chunk from its true start.
        n = letters.size
        length = max(64, int(np.sqrt(n * self.num_states)) + 1)
        chunks = -(-n // length)
        padded = np.zeros(chunks * length, dtype=np.int64)
        padded[:n] = letters
        grid = padded.reshape(chunks, length)
        cur = np.broadcast_to(np.arange(self.num_states, dtype=np.int32), (chunks, self.num_states)).copy()
        for i in range(length):
            cur = self.step_many(cur, grid[:, i][:, None])
        starts = np.empty(chunks, dtype=np.int32)
        s = s0
        for c in range(chunks):
            starts[c] = s
            s = cur[c, s]
        out = np.empty((chunks, length), dtype=np.int32)
        cur1 = starts
        for i in range(length):
            cur1 = self.step_many(cur1, grid[:, i])
            out[:, i] = cur1
        return out.reshape(-1)[:n]

    def verdicts(self, states: np.ndarray) -> np.ndarray:
        """Verdict codes (``int8``, :class:`Verdict` values) of states."""
        out: np.ndarray = self.labels[states]
        return out


class DFABank:
    """Many DFAs stepped together over one shared predicate vector.

    Each DFA's atoms are mapped to columns of the frame vector by name
    (``predicates``).  A bank keeps one current state per DFA; ``step`` reads
    one frame (``bool[P]``), ``run`` a whole ``bool[T, P]`` matrix.
    """

    def __init__(self, dfas: Sequence[DFA], predicates: Sequence[str] | Mapping[str, int],
                 max_table_atoms: int = TABLE_MAX_ATOMS, num_columns: int | None = None) -> None:
        """``predicates``: the frame vector's column names in order, or a
        mapping name → column (several names may share a column) together
        with ``num_columns``."""
        self.dfas = list(dfas)
        if isinstance(predicates, Mapping):
            index: Mapping[str, int] = dict(predicates)
            width = num_columns if num_columns is not None else max(index.values(), default=-1) + 1
        else:
            index = {p: i for i, p in enumerate(predicates)}
            width = len(index)
        self.predicates = index
        self.num_columns = width
        self.tables = [StepTable.from_dfa(d, max_table_atoms) for d in self.dfas]
        missing = sorted({a for d in self.dfas for a in d.atoms if a not in index})
        if missing:
            raise KeyError(f'bank DFAs read predicates {missing} that are not in the frame vector '
                           f'(known: {sorted(index)})')
        n = len(self.dfas)
        if max_table_atoms > _LETTER_BITS:
            raise ValueError(f'bank tables support at most {_LETTER_BITS} atoms, got max_table_atoms={max_table_atoms}')
        # Dense: has a table whose pre-shifted targets fit in int32.
        self.dense = np.array([t.table is not None and (t.num_states << t.num_atoms) < 2**31
                               for t in self.tables], dtype=bool)
        # letters = sum_j frame[cols[i, j]] * 2**j, as a gather and a small
        # float32 matrix-vector product (exact below 2**24).  Unused slots of
        # cols read column ``pad``: a constant-false column appended to frames
        # that do not already provide one (``false_column``).
        self._k_max = max([len(d.atoms) for d, t in zip(self.dfas, self.tables) if t.table is not None] or [1])
        self._pow2 = (2.0 ** np.arange(self._k_max)).astype(np.float32)
        self._cols = np.full((n, self._k_max), -1, dtype=np.intp)
        self._false_column: int | None = None
        self._weights: np.ndarray | None = None
        # One flat table for all dense DFAs holding *pre-shifted* targets
        # (target << k_i), so a step is one add and one gather:
        #   shifted' = flat[shifted + letter + offset].
        # Slots of diagram-walked DFAs point at a final entry 0 that maps to
        # itself, keeping their indices in range; they are stepped separately.
        # Identical tables (instances of one template, repeated properties)
        # are stored once, which keeps the gather cache-friendly.
        offsets = np.zeros(n, dtype=np.int64)
        shifts = np.zeros(n, dtype=np.int64)
        flat: list[np.ndarray] = []
        seen_tables: dict[bytes, int] = {}
        total = 0
        for i, (d, t) in enumerate(zip(self.dfas, self.tables)):
            if not self.dense[i]:
                continue
            k = len(d.atoms)
            for j, a in enumerate(d.atoms):
                self._cols[i, j] = index[a]
            shifts[i] = k
            assert t.table is not None     # dense DFAs have a table
            key = t.table.tobytes() + k.to_bytes(1, 'little')
            if key not in seen_tables:
                seen_tables[key] = total
                flat.append(t.table.astype(np.int32) << k)
                total += t.table.size
            offsets[i] = seen_tables[key]
        offsets[~self.dense] = total
        flat.append(np.zeros(1, dtype=np.int32))
        self._flat = np.concatenate(flat)
        if total >= 2**31:
            raise ValueError(f'bank tables hold {total} entries; at most 2**31 are supported')
        self._offsets = offsets.astype(np.int32)
        self._shifts = shifts
        self._shifts32 = shifts.astype(np.int32)
        self._sparse = np.nonzero(~self.dense)[0]
        self._sparse_cols = [np.array([index[a] for a in self.dfas[i].atoms], dtype=np.int64)
                             for i in self._sparse]
        self.initial = np.array([d.initial for d in self.dfas], dtype=np.int32)
        label_offsets = np.cumsum([0] + [d.num_states for d in self.dfas])[:-1]
        self._label_offsets = label_offsets.astype(np.int64)
        self._labels = np.concatenate([t.labels for t in self.tables]) if self.dfas else np.zeros(0, np.int8)
        self.state = self.initial.copy()

    def __len__(self) -> int:
        return len(self.dfas)

    def reset(self, which: np.ndarray | None = None) -> None:
        """Put all DFAs (or the boolean mask ``which``) back in their initial state."""
        if which is None:
            self.state[:] = self.initial
        else:
            self.state[which] = self.initial[which]

    def set_false_column(self, column: int) -> None:
        """Declare a column of the frames that is always false; unused atom
        slots read it instead of a padding column (saves a copy per frame)."""
        self._cols[self._cols < 0] = column
        self._false_column = column
        self._weights = None

    def letters(self, frames: np.ndarray, dtype: type = np.int32) -> np.ndarray:
        """Per-DFA letters of frames ``bool[..., P]`` → ``int32[..., D]`` (or
        ``dtype``; dense DFAs only).

        Computed as ``frames @ W`` with ``W[p, i] = sum of 2**j over the atoms j
        of DFA i read from column p`` (float32, exact below 2**24): one BLAS
        call for a whole batch of frames.  ``W`` is built on first use."""
        frames = np.asarray(frames, dtype=bool)
        if self._weights is None:
            w = np.zeros((self.num_columns, len(self.dfas)), dtype=np.float32)
            for i, j in zip(*np.nonzero(self._cols >= 0)):
                w[self._cols[i, j], i] += float(1 << j)
            if self._false_column is not None:
                w[self._false_column] = 0.0
            self._weights = w
        out: np.ndarray = (frames.astype(np.float32) @ self._weights).astype(dtype)
        return out

    def transition(self, states: np.ndarray, frames: np.ndarray, letters: np.ndarray | None = None,
                   part: slice | None = None) -> np.ndarray:
        """Successor states of ``states`` (``[..., D]``) on ``frames``
        (``bool[..., P]``); pass ``letters`` when already computed with
        :meth:`letters` for the same frames.  With ``part``, ``states`` and
        ``letters`` hold only that contiguous slice of the bank's DFAs."""
        frames = np.asarray(frames, dtype=bool)
        sl = part if part is not None else slice(0, len(self.dfas))
        if letters is None:
            letters = self.letters(frames)[..., sl]
        shifts = self._shifts32[sl]
        if self._sparse.size:
            states_d = np.where(self.dense[sl], states, 0)
        else:
            states_d = states
        index = (states_d << shifts) + letters + self._offsets[sl]
        nxt: np.ndarray = (self._flat[index] >> shifts).astype(np.int32, copy=False)
        if self._sparse.size:
            self._step_sparse(frames, np.asarray(states), nxt, sl)
        return nxt

    # Column-major variants: frames ``bool[C, B]``, states and letters ``[D, B]``
    # (the monitor's layout: gathering a column for every rollout is contiguous).
    def letters_cm(self, frames_cm: np.ndarray) -> np.ndarray:
        """Letters ``int32[D, B]`` of column-major frames (needs :meth:`set_false_column`)."""
        if self._false_column is None:
            raise ValueError('letters_cm needs set_false_column() first')
        cols = self._cols
        out = frames_cm[cols[:, 0]].astype(np.int32)
        for j in range(1, cols.shape[1]):
            bit = frames_cm[cols[:, j]].astype(np.int32)
            bit <<= j
            out |= bit
        return out

    def transition_cm(self, states: np.ndarray, frames_cm: np.ndarray, letters: np.ndarray,
                      part: slice) -> np.ndarray:
        """Successors of ``states`` (``[D_part, B]``) for the DFAs in ``part``."""
        shifts = self._shifts32[part][:, None]
        states_d = np.where(self.dense[part][:, None], states, 0) if self._sparse.size else states
        index = (states_d << shifts) + letters + self._offsets[part][:, None]
        nxt = (self._flat[index] >> shifts).astype(np.int32, copy=False)
        if self._sparse.size:
            self._step_sparse(frames_cm.T, np.asarray(states).T, nxt.T, part)
        out: np.ndarray = nxt
        return out

    def labels_cm(self, states: np.ndarray, part: slice) -> np.ndarray:
        out: np.ndarray = self._labels[self._label_offsets[part][:, None] + states]
        return out

    def _step_sparse(self, frames: np.ndarray, states: np.ndarray, nxt: np.ndarray, sl: slice) -> None:
        frames2 = frames.reshape(-1, frames.shape[-1])
        st2, nx2 = states.reshape(-1, states.shape[-1]), nxt.reshape(-1, nxt.shape[-1])
        for i, cols in zip(self._sparse, self._sparse_cols):
            if not sl.start <= i < sl.stop:
                continue
            weights = np.int64(1) << np.arange(cols.size, dtype=np.int64)
            letters = frames2[:, cols].astype(np.int64) @ weights
            for row in range(frames2.shape[0]):
                nx2[row, i - sl.start] = self.dfas[i].step(int(st2[row, i - sl.start]), int(letters[row]))

    def step(self, frame: np.ndarray, states: np.ndarray | None = None) -> np.ndarray:
        """Advance every DFA by one frame ``bool[..., P]``; returns the new
        states, and keeps them when ``states`` is not given."""
        cur = self.state if states is None else states
        nxt = self.transition(cur, frame)
        if states is None:
            self.state = nxt
        return nxt

    def run(self, frames: np.ndarray, start: np.ndarray | None = None) -> np.ndarray:
        """States ``int32[T, D]`` after each of the frames ``bool[T, P]``.

        Does not change the bank's current state.
        """
        frames = np.asarray(frames, dtype=bool)
        T, n = frames.shape[0], len(self.dfas)
        first = self.initial if start is None else np.asarray(start)
        shifted_out = np.empty((T, n), dtype=np.int32)
        index = self.letters(frames, np.intp)   # take() wants intp indices (no per-call cast)
        index += self._offsets
        cur = (np.where(self.dense, first, 0).astype(np.int64) << self._shifts).astype(np.int32)
        take = self._flat.take              # the bound method: no numpy-level wrapper per frame
        for t in range(T):
            row = index[t]
            row += cur                      # in place: index rows are used once
            cur = shifted_out[t]
            take(row, out=cur, mode='clip')  # 'clip' avoids take's out-buffering; indices are in range
        out = shifted_out >> self._shifts32
        for i, cols in zip(self._sparse, self._sparse_cols):
            letters_i = self.tables[i].letters_from_matrix(frames[:, cols])
            out[:, i] = self.tables[i].run(letters_i, int(first[i]))
        return out

    def labels(self, states: np.ndarray, part: slice | None = None) -> np.ndarray:
        """Verdict codes (``int8``) of per-DFA states (any leading shape)."""
        offsets = self._label_offsets if part is None else self._label_offsets[part]
        out: np.ndarray = self._labels[offsets + states]
        return out
