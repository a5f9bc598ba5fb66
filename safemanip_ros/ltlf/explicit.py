"""LTLf → DFA by explicit states, each breadth-first layer expanded at once with numpy.

The symbolic compiler (:mod:`.compiler`) pays a few hundred microseconds of
Python BDD work per state.  Formulas with several long windows, such as
``G(a -> F[0,k] (b & F[0,k] c))`` (about k³/6 states: 176,853 at k = 100),
need millions of states' worth of that.  This construction computes the same
automaton with every state of a layer, and every letter, in one array pass.

Method:

* The formula is put in negation normal form (negations on atoms only, with
  the duals ``X``/``WX``, ``U``/``R``, ``F``/``G``, ``F[a,b]``/``G[a,b]``), so
  every next-step obligation ``X χ`` / ``WX χ`` occurs positively and a state
  is a *monotone* boolean function of the obligations.
* Obligations fall into *chains*, as in the symbolic compiler: ``X F[l,h] φ``
  with the same strength, ``φ`` and ``l`` are ordered by implication, so a
  conjunction needs only the strongest of a chain.  Every other obligation is
  a chain of its own.  A *disjunct* is a vector with one entry per chain: the
  rank of the obligation it requires there (0 = strongest) or the chain's
  length (nothing required).  ``d`` implies ``e`` iff ``d ≤ e`` entry-wise.
* A state is the antichain of the weakest disjuncts of its function: the
  unique canonical form of a monotone function over the chains' consistent
  assignments, the same states the symbolic compiler's normal form gives.
* Each obligation's expansion under each letter (a small antichain over the
  next step's obligations) is tabulated once.  A disjunct's successor under a
  letter is the product of its obligations' expansions (entry-wise minimum),
  reduced to an antichain; it is computed once per distinct disjunct, and a
  state's successor is the *join* (union, weakest elements) of its
  disjuncts' successors.  Antichains are interned and matched exactly.
* The explicit transition table is minimised and numbered by
  :mod:`.table`, which yields the same :class:`~.dfa.DFA` as the symbolic
  compiler, node for node.

Letters are enumerated (2^atoms per state), so this suits formulas with few
atoms and interacting windows; :func:`.compiler.construction_for` chooses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

from ..errors import StateBudgetError
from . import formula as fm
from .antichains import Antichains, KeyIndex, strides_of, weakest
from .formula import Formula
from .nnf import to_nnf
from .table import distinct, group_equal, in_order_of_appearance, lexicographic_letters, ranges

# Letters are enumerated per state; past this many atoms the symbolic
# compiler, which only splits on the atoms a state reads, is the better tool.
MAX_ATOMS = 6
# Disjunct vectors are encoded as mixed-radix int64 keys, and pairs of
# antichain ids as one int64.
_MAX_KEY = 1 << 62
_MAX_ANTICHAINS = 1 << 31


class NotTabulable(Exception):
    """The formula is outside what this construction handles (too many atoms,
    too many obligation combinations for an int64 key)."""


# A DNF over next-step obligations: minimal conjunctions (sets of obligation ids).
_Dnf = frozenset[frozenset[int]]
_TRUE_DNF: _Dnf = frozenset({frozenset()})
_FALSE_DNF: _Dnf = frozenset()


def _minimal(conjunctions: Iterable[frozenset[int]]) -> _Dnf:
    """Drop every conjunction that contains another (it implies it)."""
    ordered = sorted(set(conjunctions), key=len)
    kept: list[frozenset[int]] = []
    for c in ordered:
        if not any(k <= c for k in kept):
            kept.append(c)
    return frozenset(kept)


def _product(x: _Dnf, y: _Dnf) -> _Dnf:
    if not x or not y:
        return _FALSE_DNF
    if x == _TRUE_DNF:
        return y
    if y == _TRUE_DNF:
        return x
    return _minimal(a | b for a in x for b in y)


@dataclass(frozen=True)
class Tables:
    """The obligations of a formula and their expansions, as arrays.

    Attributes:
        atoms: the formula's atoms; bit ``j`` of a letter is ``atoms[j]``.
        lengths: per chain, its number of obligations (the "nothing required" rank).
        strong: per chain, whether its obligations are strong (``X``): a trace
            may end in a state only where a disjunct requires no strong one.
        initial: the initial state's disjuncts (``X φ``), as rows of ranks.
        offsets: chain ``c``'s rank ``r`` is slot ``offsets[c] + r`` of the
            expansion tables (``r = lengths[c]`` is the unit: true).
        exp_start, exp_count: per (letter, slot), the rows of ``exp_rows``
            that make its expansion's antichain (count 0: false).
        exp_rows: disjunct rows (ranks per chain).
        key_space: how many disjuncts there are (disjunct keys lie in
            ``range(key_space)``).
    """

    atoms: tuple[str, ...]
    lengths: np.ndarray
    strong: np.ndarray
    initial: np.ndarray
    offsets: np.ndarray
    exp_start: np.ndarray
    exp_count: np.ndarray
    exp_rows: np.ndarray
    key_space: int


def tabulate(f: Formula, max_atoms: int = MAX_ATOMS) -> Tables:
    """The obligation closure of ``X f`` and every obligation's expansion
    under every letter.

    Raises:
        NotTabulable: more than ``max_atoms`` atoms, or more obligation
            combinations than an int64 key holds.
    """
    atoms = tuple(sorted(f.atoms))
    if len(atoms) > max_atoms:
        raise NotTabulable(f'{len(atoms)} atoms (at most {max_atoms} are enumerated)')
    n_letters = 1 << len(atoms)
    bit = {a: 1 << j for j, a in enumerate(atoms)}
    root = to_nnf(f)

    obligations: list[tuple[bool, Formula]] = []
    index: dict[tuple[bool, Formula], int] = {}

    def obligation(strong: bool, chi: Formula) -> _Dnf:
        if chi is fm.FF and strong:
            return _FALSE_DNF          # X false: the trace must go on and satisfy false
        if chi is fm.TT and not strong:
            return _TRUE_DNF           # WX true
        key = (strong, chi)
        o = index.get(key)
        if o is None:
            o = index[key] = len(obligations)
            obligations.append(key)
        return frozenset({frozenset({o})})

    memo: list[dict[Formula, _Dnf]] = [{} for _ in range(n_letters)]

    def dnf(g: Formula, letter: int) -> _Dnf:
        r = memo[letter].get(g)
        if r is None:
            r = _dnf(g, letter)
            memo[letter][g] = r
        return r

    def _dnf(g: Formula, letter: int) -> _Dnf:
        op, args = g.op, g.args
        if op == fm.TRUE:
            return _TRUE_DNF
        if op == fm.FALSE:
            return _FALSE_DNF
        if op == fm.ATOM:
            return _TRUE_DNF if letter & bit[g.name] else _FALSE_DNF
        if op == fm.NOT:      # on an atom, in NNF
            return _FALSE_DNF if letter & bit[args[0].name] else _TRUE_DNF
        if op == fm.AND:
            return _product(dnf(args[0], letter), dnf(args[1], letter))
        if op == fm.OR:
            return _minimal(dnf(args[0], letter) | dnf(args[1], letter))
        if op == fm.NEXT:
            return obligation(True, args[0])
        if op == fm.WEAK_NEXT:
            return obligation(False, args[0])
        if op == fm.EVENTUALLY:
            return _minimal(dnf(args[0], letter) | obligation(True, g))
        if op == fm.ALWAYS:
            return _product(dnf(args[0], letter), obligation(False, g))
        if op in (fm.UNTIL, fm.WEAK_UNTIL):
            later = _product(dnf(args[0], letter), obligation(op == fm.UNTIL, g))
            return _minimal(dnf(args[1], letter) | later)
        if op == fm.RELEASE:
            return _product(dnf(args[1], letter), _minimal(dnf(args[0], letter) | obligation(False, g)))
        if op in (fm.BOUNDED_EVENTUALLY, fm.BOUNDED_ALWAYS):
            assert g.bounds is not None
            lo, hi = g.bounds
            eventually = op == fm.BOUNDED_EVENTUALLY
            build = fm.Eventually if eventually else fm.Always
            sub = args[0]
            if lo > 0:
                return obligation(eventually, build(sub, (lo - 1, hi - 1)))
            here = dnf(sub, letter)
            if hi == 0:
                return here
            later = obligation(eventually, build(sub, (0, hi - 1)))
            return _minimal(here | later) if eventually else _product(here, later)
        raise AssertionError(f'not in negation normal form: {op!r}')

    initial = obligation(True, root)
    expansions: list[list[_Dnf]] = []     # per obligation, per letter
    while len(expansions) < len(obligations):      # the closure grows as it is expanded
        _, chi = obligations[len(expansions)]
        expansions.append([dnf(chi, letter) for letter in range(n_letters)])

    # Chains: bounded obligations sharing strength, operator, operand and lower bound.
    groups: dict[tuple[object, ...], list[tuple[int, int]]] = {}
    for o, (strong, chi) in enumerate(obligations):
        if chi.op in (fm.BOUNDED_EVENTUALLY, fm.BOUNDED_ALWAYS):
            assert chi.bounds is not None
            lo, hi = chi.bounds
            strength = hi if chi.op == fm.BOUNDED_EVENTUALLY else -hi    # smaller: stronger
            groups.setdefault((strong, chi.op, chi.args[0], lo), []).append((strength, o))
        else:
            groups[('single', o)] = [(0, o)]
    chain_of = np.zeros(len(obligations), dtype=np.int64)
    rank_of = np.zeros(len(obligations), dtype=np.int64)
    lengths_l: list[int] = []
    strong_l: list[bool] = []
    for c, members in enumerate(groups.values()):
        for r, (_, o) in enumerate(sorted(members)):
            chain_of[o], rank_of[o] = c, r
        lengths_l.append(len(members))
        strong_l.append(obligations[members[0][1]][0])
    lengths = np.array(lengths_l, dtype=np.int64)
    key_space = 1
    for n in lengths_l:
        key_space *= n + 1
    if key_space >= _MAX_KEY:
        raise NotTabulable('too many obligation combinations for an int64 key')

    m = len(lengths_l)
    strides = strides_of(lengths)
    # Every expansion (per obligation and letter), then the initial state, as
    # conjunction rows with a group id each, reduced to antichains at once.
    conj_rows: list[np.ndarray] = []
    conj_group: list[int] = []
    dnfs = [d for per_letter in expansions for d in per_letter] + [initial]
    for g, d in enumerate(dnfs):
        for conj in d:
            v = lengths.copy()
            for o in conj:
                c = chain_of[o]
                v[c] = min(v[c], rank_of[o])
            conj_rows.append(v)
            conj_group.append(g)
    vec = _matrix(conj_rows, m)
    group, _, vec = weakest(np.array(conj_group, dtype=np.int64), _keys(vec, strides), vec)
    counts = np.bincount(group, minlength=len(dnfs))
    starts = np.zeros(len(dnfs), dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])

    offsets = np.zeros(m, dtype=np.int64)
    if m:
        offsets[1:] = np.cumsum(lengths + 1)[:-1]
    n_slots = int((lengths + 1).sum())
    exp_start = np.zeros((n_letters, n_slots), dtype=np.int64)
    exp_count = np.zeros((n_letters, n_slots), dtype=np.int64)
    for c in range(m):
        exp_count[:, offsets[c] + lengths[c]] = 1      # exp_start 0: the unit row
    # Row 0 of the table is the unit (nothing required); expansion rows follow.
    slot = offsets[chain_of] + rank_of                 # per obligation
    n_exp = len(obligations) * n_letters
    exp_start[:, slot] = (1 + starts[:n_exp]).reshape(len(obligations), n_letters).T
    exp_count[:, slot] = counts[:n_exp].reshape(len(obligations), n_letters).T
    init = starts[n_exp]
    return Tables(
        atoms=atoms, lengths=lengths, strong=np.array(strong_l, dtype=bool), key_space=key_space,
        initial=vec[init:init + counts[n_exp]], offsets=offsets,
        exp_start=exp_start, exp_count=exp_count, exp_rows=np.concatenate([lengths[None, :], vec]))


def _matrix(vectors: list[np.ndarray], m: int) -> np.ndarray:
    out = np.zeros((len(vectors), m), dtype=np.int64)
    if vectors:
        out[:] = vectors
    return out


@dataclass(frozen=True)
class Explored:
    """Reachable states as an explicit table: ``delta[s, letter]`` is the
    successor of state ``s`` (0 = the initial state); ``accepting[s]`` whether
    a trace may end there.  States are numbered breadth first, each state's
    successors in lexicographic letter order (the minimal DFA's numbering)."""

    delta: np.ndarray
    accepting: np.ndarray


GROWTH_LAYERS = 4
"""Layers over which exploration's growth is judged for an early refusal."""
GROWTH_RATIO = 1.5
PROJECTION_MARGIN = 100
"""An early refusal needs the projection to pass the budget this many times over."""


def explore(t: Tables, max_states: int | None = None, delay_frames: int = 0) -> Explored:
    """Every state reachable from ``t.initial``, breadth first, one layer per pass.

    A state is an antichain of disjuncts, and its successor under a letter is
    the join (union, then weakest elements) of its disjuncts' successors.
    Far fewer distinct disjuncts than states occur (5,152 against 176,853
    for the nested window at k = 100), so each disjunct's successors are
    computed once; a layer then costs a few table look-ups per state and
    letter, and one join per distinct pair of antichains it meets.

    ``delay_frames``: the longest delay of a window (``l`` of ``F[l,h]``).
    A window that starts later remembers the triggers of each frame of its
    delay, so the states can double with every layer until then; when the
    last :data:`GROWTH_LAYERS` layers each grew at least
    :data:`GROWTH_RATIO`-fold and that growth, kept up to the delay's end,
    passes ``max_states`` :data:`PROJECTION_MARGIN` times over, exploration
    stops at once (StateBudgetError with the projection) instead of filling
    memory up to the budget."""
    n_letters = t.exp_start.shape[0]
    store = Antichains(t.lengths, t.key_space)
    disjuncts = _Disjuncts(t, store)
    false_id = store.intern_one(np.zeros(0, dtype=np.int64))

    state_of = np.full(16, -1, dtype=np.int64)      # antichain id → state id
    n_states = 0

    def discover(ids: np.ndarray) -> np.ndarray:
        """Register the unseen antichains among ``ids`` as states (in order of
        first appearance); returns them."""
        nonlocal state_of, n_states
        if len(store) > len(state_of):
            grown = np.full(2 * len(store), -1, dtype=np.int64)
            grown[:len(state_of)] = state_of
            state_of = grown
        fresh: np.ndarray = ids[state_of[ids] < 0]
        if not len(fresh):
            return fresh
        fresh = in_order_of_appearance(fresh)
        state_of[fresh] = n_states + np.arange(len(fresh))
        n_states += len(fresh)
        return fresh

    # States are numbered as the minimal DFA numbers them (breadth first,
    # successors in lexicographic letter order), so when no two are
    # equivalent the numbering is already final.
    lex = lexicographic_letters(len(t.atoms))
    first = store.intern_one(np.sort(_keys(t.initial, store.strides)))
    frontier = discover(np.array([first]))
    delta_layers: list[np.ndarray] = []
    accepting_layers: list[np.ndarray] = []
    layer_sizes: list[int] = [len(frontier)]
    while len(frontier):
        members, owner = disjuncts.of(frontier)        # disjunct indices, frontier position
        accepting = np.zeros(len(frontier), dtype=bool)
        accepting[owner[disjuncts.free[members]]] = True
        accepting_layers.append(accepting)
        succ = disjuncts.successors[members]           # (rows, letters) antichain ids
        # Fold each state's disjuncts left to right: join with the next one.
        counts = np.bincount(owner, minlength=len(frontier))
        starts = np.zeros(len(frontier), dtype=np.int64)
        np.cumsum(counts[:-1], out=starts[1:])
        cur = np.full((len(frontier), n_letters), false_id, dtype=np.int64)
        has = counts > 0
        cur[has] = succ[starts[has]]
        for i in range(1, int(counts.max(initial=0))):
            rows = np.flatnonzero(counts > i)
            cur[rows] = _join(store, cur[rows], succ[starts[rows] + i], false_id)
        frontier = discover(cur[:, lex].reshape(-1))
        delta_layers.append(cur.reshape(-1))
        if max_states is not None and n_states > max_states:
            raise StateBudgetError(n_states, len(delta_layers), max_states)
        layer_sizes.append(len(frontier))
        if max_states is not None:
            projected = _projected(layer_sizes, n_states, delay_frames)
            if projected > PROJECTION_MARGIN * max_states:
                raise StateBudgetError(n_states, len(delta_layers), max_states, projected)
    delta = state_of[np.concatenate(delta_layers)].reshape(-1, n_letters)
    return Explored(delta, np.concatenate(accepting_layers))


def _projected(layer_sizes: list[int], n_states: int, delay_frames: int) -> float:
    """States by the end of the longest delay if the layers keep growing as
    slowly as the slowest of the last :data:`GROWTH_LAYERS` (0.0: they do
    not grow steadily, or the delay is over)."""
    remaining = delay_frames - (len(layer_sizes) - 1)
    if remaining <= 0 or len(layer_sizes) <= GROWTH_LAYERS:
        return 0.0
    last = layer_sizes[-GROWTH_LAYERS - 1:]
    if not all(last[:-1]):
        return 0.0
    ratio = min(b / a for a, b in zip(last, last[1:]))
    if ratio < GROWTH_RATIO:
        return 0.0
    return float(n_states + last[-1] * ratio ** min(remaining, 1000))


def _join(store: 'Antichains', x: np.ndarray, y: np.ndarray, false_id: int) -> np.ndarray:
    """Element-wise join of interned antichains (the disjunction of two
    states).  Each distinct pair is joined once per call; pairs do not recur
    across layers (measured: none of 181,698 did), so nothing is memoised."""
    lo, hi = np.minimum(x, y), np.maximum(x, y)
    out: np.ndarray = hi.copy()                     # lo == hi, or lo is false
    work = (lo != hi) & (lo != false_id)
    if not work.any():
        return out
    if len(store) >= _MAX_ANTICHAINS:
        raise NotTabulable(f'more than {_MAX_ANTICHAINS} antichains')
    pairs = (lo[work] << 32) | hi[work]
    first, inverse = group_equal(pairs)
    uniq = pairs[first]
    a, b = uniq >> 32, uniq & 0xFFFFFFFF
    joined = np.empty(len(uniq), dtype=np.int64)
    # Most joins (97 % for the nested window) are of two single disjuncts:
    # the weaker one if they are comparable, else both.
    single = (store.count[a] == 1) & (store.count[b] == 1)
    if single.any():
        ka, kb = store.keys[store.start[a[single]]], store.keys[store.start[b[single]]]
        va, vb = store.vectors(ka), store.vectors(kb)
        a_weaker, b_weaker = (vb <= va).all(axis=1), (va <= vb).all(axis=1)
        both = ~(a_weaker | b_weaker)
        pair = np.stack([np.minimum(ka[both], kb[both]), np.maximum(ka[both], kb[both])], axis=1)
        joined[single] = np.where(a_weaker, a[single], b[single])
        joined[np.flatnonzero(single)[both]] = store.ids_of(pair)
    wide = ~single
    if wide.any():
        a, b = a[wide], b[wide]
        n = len(a)
        group = np.concatenate([np.repeat(np.arange(n), store.count[a]), np.repeat(np.arange(n), store.count[b])])
        keys = np.concatenate([store.keys[ranges(store.start[a], store.count[a])],
                               store.keys[ranges(store.start[b], store.count[b])]])
        group, keys, _ = weakest(group, keys, store.vectors(keys))
        joined[wide] = store.intern(group, keys, n)
    out[work] = joined[inverse.reshape(-1)]
    return out


class _Disjuncts:
    """The distinct disjuncts met so far, each with its successor antichain
    per letter (computed once, for a whole batch of new disjuncts)."""

    def __init__(self, t: Tables, store: Antichains) -> None:
        self.t, self.store = t, store
        n_letters = t.exp_start.shape[0]
        self._index = KeyIndex(t.key_space)           # disjunct key → disjunct index
        self.successors = np.zeros((0, n_letters), dtype=np.int64)
        self.free = np.zeros(0, dtype=bool)

    def of(self, antichains: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(disjunct indices, position in ``antichains``) of every member of
        every given antichain, in order."""
        store = self.store
        keys = store.keys[ranges(store.start[antichains], store.count[antichains])]
        owner = np.repeat(np.arange(len(antichains)), store.count[antichains])
        uniq = distinct(keys)
        new_keys = uniq[self._index.get(uniq) < 0]
        if len(new_keys):
            self._add(new_keys)
        return self._index.get(keys), owner

    def _add(self, keys: np.ndarray) -> None:
        t, store = self.t, self.store
        base = len(self.successors)
        self._index.set(keys, base + np.arange(len(keys)))
        vec = store.vectors(keys)
        n_letters = t.exp_start.shape[0]
        group, rows = _successor_rows(t, vec, np.arange(len(keys)), n_letters)
        group, rkeys, rows = weakest(group, _keys(rows, store.strides), rows)
        ids = store.intern(group, rkeys, len(keys) * n_letters).reshape(len(keys), n_letters)
        self.successors = np.concatenate([self.successors, ids])
        free = (vec[:, t.strong] == t.lengths[t.strong]).all(axis=1)
        self.free = np.concatenate([self.free, free])


def _keys(vec: np.ndarray, strides: np.ndarray) -> np.ndarray:
    return vec @ strides if len(strides) else np.zeros(len(vec), dtype=np.int64)


def _successor_rows(t: Tables, rows: np.ndarray, state: np.ndarray, n_letters: int) -> tuple[np.ndarray, np.ndarray]:
    """Every successor disjunct of every (frontier state, letter): the product,
    over the chains a row requires, of those obligations' expansions.
    Returns (group = state × n_letters + letter, disjunct rows)."""
    n_rows = len(rows)
    src = np.repeat(np.arange(n_rows), n_letters)
    letter = np.tile(np.arange(n_letters), n_rows)
    acc = np.broadcast_to(t.lengths, (len(src), len(t.lengths))).copy()
    for c in np.flatnonzero((rows < t.lengths).any(axis=0)):
        slot = t.offsets[c] + rows[src, c]
        count = t.exp_count[letter, slot]
        start = t.exp_start[letter, slot]
        keep = np.repeat(np.arange(len(src)), count)
        table_rows = ranges(start, count)
        src, letter = src[keep], letter[keep]
        acc = np.minimum(acc[keep], t.exp_rows[table_rows])
    return state[src] * n_letters + letter, acc
