"""SEMANTICS.md §4's violation machine, compiled into one table per instance.

An instance's main DFA M, its recovery DFA R and its mode (watching or in a
violation episode) form a finite machine of their own.  Its state is
``(violated, m, r, fresh)`` — ``fresh``: M has read nothing since it was
(re)started — and its letter is one frame's values of the instance's atoms,
those of M and of R together.  A *record* is one (state, letter) entry: the
successor state and what the frame did (:data:`OPENED` an episode,
:data:`CLOSED` one as recovered).  So the monitor steps an instance with one
gather per frame, live (:meth:`~safemanip_ros.monitor.core.Monitor.step`) and
over whole rollouts (``Monitor.run``) alike, and the rules of §4 are written
once, in :func:`_successors`, which fills the tables.

Addresses.  Every state has a *base*: an index into the state arrays
(``main_label``, ``recovery_label``, ``violated``, ``fresh``).  For an
instance with a dense table the base is ``offset + (state << k)`` and its
record for letter ``L`` (``k`` atoms) is ``base + L``.  A record's
*outcome* packs the successor's base and the frame's events,
``next_base << 2 | events``, so one frame is one gather:
``outcome = outcomes[base + L]``, ``base = outcome >> 2``.  Offline, a
copy with each entry four times (:attr:`ViolationMachines.by_code`) is
indexed by the last outcome itself, ``outcome = by_code[outcome + (L << 2)]``:
an add and a gather a frame, with no shift between them.
Instances whose table would exceed :data:`DENSE_MAX_RECORDS` entries are
*wide*: their records are made the first time a (state, letter) pair is
read, by the same function, and found through a dictionary.  Instances with
the same automata over the same atom layout share one table.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ..errors import SpecError
from ..ltlf.dfa import DFA
from ..ltlf.runtime import TABLE_MAX_ATOMS, StepTable
from ..ltlf.verdict import Verdict

OPENED = 1
"""Event bit: the frame opened a violation episode (M's verdict became false)."""
CLOSED = 2
"""Event bit: the frame closed the open episode as recovered (R accepted)."""

DENSE_MAX_RECORDS = 1 << 16
"""Largest table (states × letters) built in full; larger instances are wide."""

CODED_MAX_RECORDS = 1 << 20
"""Largest table (in records) that also gets :attr:`ViolationMachines.by_code`, four entries a record."""

MAX_ATOMS = 62
"""Most atoms an instance's two automata may read together (letters are int64)."""


_FALSE, _TRUE, _PT = int(Verdict.FALSE), int(Verdict.TRUE), int(Verdict.PRESUMABLY_TRUE)


class _Pair:
    """The automata of one instance over the union of their atoms: M's atoms
    in order, then R's that M does not read."""

    def __init__(self, main: DFA, recovery: DFA, recovery_next_frame: bool = False) -> None:
        self.recovery_next_frame = recovery_next_frame
        self.atoms = tuple(main.atoms) + tuple(a for a in recovery.atoms if a not in main.atom_index)
        pos = {a: j for j, a in enumerate(self.atoms)}
        self.m_pos = np.array([pos[a] for a in main.atoms], dtype=np.int64)
        self.r_pos = np.array([pos[a] for a in recovery.atoms], dtype=np.int64)
        self.num_states = 4 * main.num_states * recovery.num_states
        self.dense = (self.num_states << len(self.atoms)) <= DENSE_MAX_RECORDS
        # A dense pair is filled for every letter at once: its automata get tables too.
        table_atoms = len(self.atoms) if self.dense else TABLE_MAX_ATOMS
        self.M = StepTable.from_dfa(main, table_atoms)
        self.R = StepTable.from_dfa(recovery, table_atoms)

    def key(self) -> tuple[object, ...]:
        """Equal for pairs whose tables are equal (the atom names aside)."""
        def of(t: StepTable) -> tuple[object, ...]:
            d = t.dfa
            return (d.initial, t.labels.tobytes(), d.root, d.node_atom, d.node_low, d.node_high)
        return of(self.M), of(self.R), self.m_pos.tobytes(), self.r_pos.tobytes(), self.recovery_next_frame

    def encode(self, violated: np.ndarray, m: np.ndarray, r: np.ndarray, fresh: np.ndarray) -> np.ndarray:
        nm, nr = self.M.num_states, self.R.num_states
        out: np.ndarray = (((violated.astype(np.int64) * nm + m) * nr + r) << 1) | fresh
        return out

    def decode(self, s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(violated, m, r, fresh) of local states ``s``."""
        nm, nr = self.M.num_states, self.R.num_states
        fresh, rest = (s & 1).astype(bool), s >> 1
        return rest // (nr * nm) == 1, rest // nr % nm, rest % nr, fresh

    def initial(self) -> int:
        return int(self.encode(np.zeros(1, bool), np.array([self.M.dfa.initial]),
                               np.array([self.R.dfa.initial]), np.ones(1, np.int64))[0])


def _bits(letters: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """The sub-letter of ``letters`` made of the bits at ``positions`` (in order)."""
    out = np.zeros(letters.shape, np.int64)
    for j, p in enumerate(positions.tolist()):
        out |= ((letters >> p) & 1) << j
    return out


def _pack(frames: np.ndarray, cols: np.ndarray, dtype: type, shift: int = 0) -> np.ndarray:
    """Letters ``sum_j frames[cols[..., j]] << (j + shift)`` of frames ``bool[C, ...]``:
    ``[D, ...]`` for columns ``[D, k]``, ``[...]`` for one instance's ``[k]``."""
    if dtype == np.uint8 and frames.ndim > 1 and cols.ndim == 2 and frames.flags.c_contiguous \
            and (frames[0].size % 8) == 0:
        return _pack_words(frames, cols, shift)
    out: np.ndarray = np.zeros(cols.shape[:-1] + frames.shape[1:], dtype)
    for j in range(cols.shape[-1]):
        bit = frames[cols[..., j]].view(np.uint8)      # a fresh gather: shifted in place
        if out.dtype == np.uint8:
            # In place, in uint8: 2.5x faster than left_shift(..., dtype=uint8), which casts its operands.
            out |= np.left_shift(bit, j + shift, out=bit)
        else:
            out |= np.left_shift(bit, j + shift, dtype=dtype)
    return out


def _pack_words(frames: np.ndarray, cols: np.ndarray, shift: int) -> np.ndarray:
    """:func:`_pack` into uint8 letters (``k + shift <= 8``) of frames whose
    rows are whole 64-bit words: each row's bytes are 0 or 1, so eight of them
    shift and combine as one uint64 without carrying into one another, and
    x86 has vector shifts of 64-bit lanes but none of bytes (1.7x over
    :func:`_pack`'s uint8 gathers for a block of whole rollouts)."""
    rows = frames.reshape(frames.shape[0], -1).view(np.uint64)
    out = np.zeros((cols.shape[0], rows.shape[1]), np.uint64)
    bit = np.empty_like(out)
    for j in range(cols.shape[1]):
        np.take(rows, cols[:, j], axis=0, out=bit)
        if j + shift:
            np.left_shift(bit, j + shift, out=bit)
        out |= bit
    letters: np.ndarray = out.view(np.uint8).reshape(cols.shape[:1] + frames.shape[1:])
    return letters


def _successors(pair: _Pair, s: np.ndarray, letters: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """SEMANTICS.md §4 for one frame, elementwise: the successors of local
    states ``s`` on union letters ``letters`` and the events (OPENED |
    CLOSED bits) of that frame."""
    M, R = pair.M, pair.R
    was_violated, m, r, fresh = pair.decode(s)
    lm, lr = _bits(letters, pair.m_pos), _bits(letters, pair.r_pos)
    watching = ~was_violated
    # Step 1: a watching instance steps M; a false verdict opens an episode and
    # starts R from its initial state on this frame.
    m1 = np.where(watching, M.step_many(m, lm), m)
    opened = watching & (M.labels[m1] == _FALSE)
    violated = was_violated | opened
    r_in = np.where(opened, R.dfa.initial, r)
    # Step 2: a violated instance steps R.
    r1 = np.where(violated, R.step_many(r_in, lr), r)
    rl = R.labels[r1]
    # Step 3: R accepting closes the episode; M restarts on this frame,
    # m ← δ_M(m₀, v_t), or at m₀ when the episode opened on this very frame.
    # (Under SafeManip's rule, R is first judged on the frame after the
    # violation: an episode never closes on the frame that opened it.)
    closed = violated & ((rl == _TRUE) | (rl == _PT))
    if pair.recovery_next_frame:
        closed &= ~opened
    m0 = np.full(s.shape, M.dfa.initial, np.int64)
    m2 = np.where(closed, np.where(opened, m0, M.step_many(m0, lm)), m1)
    fresh2 = np.where(closed, opened, fresh & ~watching)
    nxt = pair.encode(violated & ~closed, m2, r1, fresh2)
    events = opened.astype(np.int8) * OPENED | closed.astype(np.int8) * CLOSED
    return nxt, events


class ViolationMachines:
    """The violation machines of ``D`` instances, addressed as in the module doc.

    Attributes:
        atoms: per instance, the atoms its letter is made of (bit ``j`` is ``atoms[d][j]``).
        initial_base: ``int64[D]``, the base of each instance's initial state.
        outcome: ``int32[records]`` (``int64`` for very large tables), a record's successor
            base << 2 | its OPENED | CLOSED bits.
        main_label, recovery_label: ``int8[bases]``, Verdict codes of M and R in a state.
        violated, fresh: ``bool[bases]``, a state's mode and fresh flag.
        dense, wide: instance indices with full tables / with tables made on demand.
        by_code: when every instance is dense (and the table not huge), ``outcome`` indexed by
            code and letter: ``by_code[c + (L << 2)] = outcome[(c >> 2) + L]`` for any outcome
            ``c``; offline stepping reads it (``None`` otherwise).
    """

    def __init__(self, pairs: Sequence[tuple[DFA, DFA]], columns: Mapping[str, int], false_column: int,
                 recovery_next_frame: Sequence[bool] | None = None) -> None:
        made: list[_Pair] = []
        for d, (main, recovery) in enumerate(pairs):
            atoms = set(main.atoms) | set(recovery.atoms)
            if len(atoms) > MAX_ATOMS:
                raise SpecError(f'instance {d} reads {len(atoms)} atoms in its formula and recovery together; '
                                f'at most {MAX_ATOMS} are supported: split the property')
            made.append(_Pair(main, recovery, bool(recovery_next_frame[d]) if recovery_next_frame else False))
        D = len(made)
        self.atoms = [p.atoms for p in made]
        self.k = np.array([len(p.atoms) for p in made], dtype=np.int64)
        is_dense = np.array([p.dense for p in made], dtype=bool)
        self.dense = np.flatnonzero(is_dense)
        self.wide = np.flatnonzero(~is_dense)
        # Dense tables, one per distinct key, laid end to end.
        next_parts: list[np.ndarray] = []
        event_parts: list[np.ndarray] = []
        state_parts: list[tuple[np.ndarray, ...]] = []
        offsets: dict[tuple[object, ...], int] = {}
        self.initial_base = np.zeros(D, np.int64)
        total = 0
        for d in self.dense.tolist():
            p = made[d]
            key = p.key()
            if key not in offsets:
                offsets[key] = total
                k = len(p.atoms)
                s = np.repeat(np.arange(p.num_states, dtype=np.int64), 1 << k)
                letters = np.tile(np.arange(1 << k, dtype=np.int64), p.num_states)
                nxt, ev = _successors(p, s, letters)
                next_parts.append(total + (nxt << k))
                event_parts.append(ev)
                # State arrays at every record index; only a state's base (letter 0) is read.
                state_parts.append(tuple(np.repeat(a, 1 << k) for a in self._state_arrays(p)))
                total += p.num_states << k
            self.initial_base[d] = offsets[key] + (p.initial() << int(self.k[d]))
        # Wide instances: every state gets a base after the dense tables; records grow on demand.
        self._wide_pairs = {d: made[d] for d in self.wide.tolist()}
        self._wide_state_offset: dict[int, int] = {}
        for d, p in self._wide_pairs.items():
            self._wide_state_offset[d] = total
            state_parts.append(self._state_arrays(p))
            self.initial_base[d] = total + p.initial()
            total += p.num_states
        self._wide_memo: dict[tuple[int, int], int] = {}
        # Outcomes hold bases, fixed here (wide records only add entries): int32 when they fit,
        # which halves the memory a whole rollout's outcomes stream through.
        dtype = np.int32 if total < 2 ** 29 else np.int64
        self.outcome = (np.concatenate(next_parts) << 2 | np.concatenate(event_parts) if next_parts
                        else np.zeros(0, np.int64)).astype(dtype)
        self._records = self.outcome.size
        states = [np.concatenate([part[i] for part in state_parts]) if state_parts else np.zeros(0)
                  for i in range(4)]
        self.main_label = states[0].astype(np.int8)
        self.recovery_label = states[1].astype(np.int8)
        self.violated = states[2].astype(bool)
        self.fresh = states[3].astype(bool)
        # Letter columns of dense instances: cols[d, j] is atom j's column (false column beyond k).
        k_dense = int(self.k[self.dense].max()) if self.dense.size else 0
        self._cols = np.full((D, k_dense), false_column, dtype=np.intp)
        for d in self.dense.tolist():
            for j, a in enumerate(self.atoms[d]):
                self._cols[d, j] = columns[a]
        self._wide_cols = {d: np.array([columns[a] for a in self.atoms[d]], dtype=np.intp) for d in self._wide_pairs}
        self.all_dense = not self.wide.size
        # Outcomes by *code* (an outcome itself, base << 2 | events): the record of code ``c`` on
        # letter ``L`` is at ``c + (L << 2)``, so a frame is an add and a gather, with no shift.
        self.by_code: np.ndarray | None = (np.repeat(self.outcome, 4)
                                           if self.all_dense and self.outcome.size <= CODED_MAX_RECORDS else None)

    @staticmethod
    def _state_arrays(p: _Pair) -> tuple[np.ndarray, ...]:
        violated, m, r, fresh = p.decode(np.arange(p.num_states, dtype=np.int64))
        return p.M.labels[m], p.R.labels[r], violated, fresh

    def __len__(self) -> int:
        return len(self.atoms)

    # ----------------------------------------------------------- letters
    def letters(self, frames: np.ndarray, shift: int = 0) -> np.ndarray:
        """Dense instances' letters ``[D, ...]`` of frames ``bool[C, ...]``
        (columns first: one frame ``[C, B]`` live, ``[C, B, T]`` over time),
        times ``2**shift``; wide instances' rows are 0 (see :meth:`records`).
        The dtype is the smallest that holds them (uint8 up to 8 bits)."""
        return _pack(frames, self._cols, np.uint8 if self._cols.shape[1] + shift <= 8 else np.uint16, shift)

    # ----------------------------------------------------------- records
    def records(self, base: np.ndarray, letters: np.ndarray, frame: np.ndarray) -> np.ndarray:
        """Record indices ``[D, B]`` (in ``base``'s integer type) of states ``base`` on one frame
        (``letters`` from :meth:`letters`, ``frame`` the column-major frame)."""
        rec: np.ndarray = base + letters
        for d in self.wide.tolist():
            rec[d] = self._wide_records(d, base[d], _pack(frame, self._wide_cols[d], np.int64))
        return rec

    def _wide_records(self, d: int, base: np.ndarray, letters: np.ndarray) -> np.ndarray:
        pairs = np.stack([base, letters], axis=1)
        uniq, inverse = np.unique(pairs, axis=0, return_inverse=True)
        found = np.array([self._wide_memo.get((int(b), int(L)), -1) for b, L in uniq.tolist()], dtype=np.int64)
        missing = np.flatnonzero(found < 0)
        if missing.size:
            p, off = self._wide_pairs[d], self._wide_state_offset[d]
            nxt, ev = _successors(p, uniq[missing, 0] - off, uniq[missing, 1])
            new = np.arange(self._records, self._records + missing.size, dtype=np.int64)
            self._grow(self._records + missing.size)
            self.outcome[new] = (off + nxt) << 2 | ev
            self._records += missing.size
            for (b, L), rec in zip(uniq[missing].tolist(), new.tolist()):
                self._wide_memo[(b, L)] = rec
            found[missing] = new
        out: np.ndarray = found[inverse.reshape(-1)]
        return out

    def _grow(self, size: int) -> None:
        if size <= self.outcome.size:
            return
        cap = max(size, 2 * self.outcome.size, 64)
        self.outcome = np.concatenate([self.outcome, np.zeros(cap - self.outcome.size, self.outcome.dtype)])
