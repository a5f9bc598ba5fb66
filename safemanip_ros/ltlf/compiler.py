"""LTLf → minimal complete DFA, symbolically.

Method (formula progression with BDDs):

* Every formula ψ is expanded into a boolean function over the *current
  letter's atoms* and *next-step obligations* ``X χ`` (strong: the trace must
  go on and satisfy χ) and ``WX χ`` (weak: the trace may end, else it must
  satisfy χ), e.g. ``a U b ≡ b | (a & X(a U b))`` and
  ``G a ≡ a & WX(G a)``.
* A DFA state is a boolean function over obligations, kept as a BDD (atoms
  ordered above obligations).  The initial state is ``X φ`` (LTLf traces are
  non-empty).  A state is accepting iff it is true when the trace ends here,
  i.e. with every ``X`` obligation false and every ``WX`` obligation true.
* The successor BDD of a state substitutes ``expand(χ)`` for each obligation.
  Its part above the first obligation variable is a decision diagram over
  the letter; where it stops are the successor states.  Atoms a state does
  not depend on are never enumerated.
* Bounded obligations are kept in normal form by subsumption, so bounded
  windows cost linear, not exponential, exploration: obligations
  ``X F[l,h] φ`` with the same ``φ``, ``l`` and strength form a *chain*
  ordered by implication (``F[l,i] φ → F[l,j] φ`` for ``i ≤ j``; for ``G``
  the other way round), so ``F[0,i] φ ∧ F[0,j] φ ≡ F[0,min(i,j)] φ`` and
  ``G[0,i] φ ∧ G[0,j] φ ≡ G[0,max(i,j)] φ``.  Every successor BDD is
  rewritten to the unique function that agrees with it on the assignments
  that respect every chain (the only ones a trace can produce), so two
  states that differ only on impossible obligation combinations are one
  state.  ``G(a -> F[0,k] b)`` explores ``k + 2`` states instead of ``2^k``.
* States are minimised by partition refinement on these symbolic transitions
  and renumbered breadth-first, so the result is the unique minimal DFA with
  a deterministic numbering.

This is the ``'symbolic'`` construction of :func:`compile_formula`; the
``'explicit'`` one (:mod:`.explicit`, :mod:`.antichains`, :mod:`.table`)
builds the same automaton with a breadth-first layer per numpy pass, and
:func:`construction_for` picks between them.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from dataclasses import replace
from typing import Callable

from ..errors import StateBudgetError
from . import formula as fm
from .bdd import BDD
from .dfa import DFA, build_dfa
from .formula import Formula
from .parser import parse

COMPILER_VERSION = 2


class _Progression:
    """Builds the (unminimised) progression automaton of one formula."""

    def __init__(self, f: Formula) -> None:
        self.formula = f
        self.atoms = tuple(sorted(f.atoms))
        self.n_atoms = len(self.atoms)
        self.bdd = BDD()
        self.atom_level = {a: j for j, a in enumerate(self.atoms)}
        self.term_level: dict[tuple[bool, Formula], int] = {}
        self.level_strong: list[bool] = []      # per obligation level - n_atoms
        self.level_formula: list[Formula] = []
        self.expand_cache: dict[Formula, int] = {}
        # Implication chains of bounded obligations: level → (chain id, rank),
        # where a true obligation of rank r implies every one of rank ≥ r in
        # its chain (and a false one every one of rank ≤ r is false).
        self.chain_of_level: dict[int, tuple[int, int]] = {}
        self.chain_ids: dict[tuple[object, ...], int] = {}
        self.normal_cache: dict[int, int] = {}

    # ------------------------------------------------------------ expansion
    def term(self, strong: bool, f: Formula) -> int:
        if f is fm.FF and strong:
            return 0  # X false: the trace must go on and satisfy false
        if f is fm.TT and not strong:
            return 1  # WX true
        key = (strong, f)
        level = self.term_level.get(key)
        if level is None:
            level = self.n_atoms + len(self.level_strong)
            self.term_level[key] = level
            self.level_strong.append(strong)
            self.level_formula.append(f)
            if f.op in (fm.BOUNDED_EVENTUALLY, fm.BOUNDED_ALWAYS):
                assert f.bounds is not None
                lo, hi = f.bounds
                chain = self.chain_ids.setdefault((strong, f.op, f.args[0], lo), len(self.chain_ids))
                self.chain_of_level[level] = (chain, hi if f.op == fm.BOUNDED_EVENTUALLY else -hi)
        return self.bdd.var(level)

    def normalise(self, f: int) -> int:
        """The canonical form of the state ``f`` (a BDD over obligations)
        modulo the obligation chains: a function of the chains' consistent
        assignments only, testing each chain just at its breakpoints.

        A consistent assignment of a chain is a threshold ``m`` (obligations
        of rank ≥ m true, the others false), so ``f`` restricted to it is a
        function ``h(m)`` that only changes where ``f`` tests a chain
        variable.  The result tests a chain variable only where ``h``
        changes and reads the interval of ``m`` from the lowest-ranked true
        variable tested — a fixed rule, so two states equal on every
        consistent assignment get the same BDD.  ``F[0,i] φ ∧ F[0,j] φ``
        thus becomes the single test ``F[0,min(i,j)] φ``."""
        if not self.chain_of_level or f <= 1:
            return f
        r = self.normal_cache.get(f)
        if r is not None:
            return r
        b, chains = self.bdd, self.chain_of_level
        present: dict[int, list[tuple[int, int]]] = {}
        seen: set[int] = set()
        stack = [f]
        while stack:
            n = stack.pop()
            if n <= 1 or n in seen:
                continue
            seen.add(n)
            ch = chains.get(b.level[n])
            if ch is not None:
                present.setdefault(ch[0], []).append((ch[1], b.level[n]))
            stack.append(b.low[n])
            stack.append(b.high[n])
        g = f
        for cid in sorted(present):
            ranked = sorted(set(present[cid]))
            if len(ranked) < 2:
                continue       # one test of a chain is already its breakpoint form
            levels = [lvl for _, lvl in ranked]
            # h[j]: the ranks below ranked[j] false, the others true.
            h = [self._restrict(g, {lvl: i >= j for i, lvl in enumerate(levels)}) for j in range(len(levels) + 1)]
            g = h[-1]
            for j in range(len(levels) - 1, -1, -1):
                if h[j] != h[j + 1]:
                    g = b.ite(b.var(levels[j]), h[j], g)
        self.normal_cache[f] = g
        return g

    def _restrict(self, f: int, values: dict[int, bool]) -> int:
        """``f`` with the variables at the given levels fixed."""
        b = self.bdd
        memo: dict[int, int] = {}

        def rec(n: int) -> int:
            if n <= 1:
                return n
            r = memo.get(n)
            if r is None:
                lvl = b.level[n]
                v = values.get(lvl)
                if v is None:
                    r = b.node(lvl, rec(b.low[n]), rec(b.high[n]))
                else:
                    r = rec(b.high[n] if v else b.low[n])
                memo[n] = r
            return r

        return rec(f)

    def normalise_leaves(self, t: int) -> int:
        """``t`` (a transition BDD) with every successor state normalised."""
        if not self.chain_of_level:
            return t
        b, n_atoms = self.bdd, self.n_atoms
        memo: dict[int, int] = {}

        def rec(c: int) -> int:
            r = memo.get(c)
            if r is None:
                if c <= 1 or b.level[c] >= n_atoms:
                    r = self.normalise(c)
                else:
                    r = b.node(b.level[c], rec(b.low[c]), rec(b.high[c]))
                memo[c] = r
            return r

        return rec(t)

    def expand(self, f: Formula) -> int:
        r = self.expand_cache.get(f)
        if r is None:
            r = self._expand(f)
            self.expand_cache[f] = r
        return r

    def _expand(self, f: Formula) -> int:
        b = self.bdd
        op = f.op
        if op == fm.TRUE:
            return 1
        if op == fm.FALSE:
            return 0
        if op == fm.ATOM:
            return b.var(self.atom_level[f.name])
        if op == fm.LAST:
            return self.term(False, fm.FF)
        if op == fm.NOT:
            return b.neg(self.expand(f.args[0]))
        if op == fm.AND:
            return b.conj(self.expand(f.args[0]), self.expand(f.args[1]))
        if op == fm.OR:
            return b.disj(self.expand(f.args[0]), self.expand(f.args[1]))
        if op == fm.IMPLIES:
            return b.disj(b.neg(self.expand(f.args[0])), self.expand(f.args[1]))
        if op == fm.IFF:
            x, y = self.expand(f.args[0]), self.expand(f.args[1])
            return b.ite(x, y, b.neg(y))
        if op == fm.NEXT:
            return self.term(True, f.args[0])
        if op == fm.WEAK_NEXT:
            return self.term(False, f.args[0])
        if op == fm.EVENTUALLY:
            return b.disj(self.expand(f.args[0]), self.term(True, f))
        if op == fm.ALWAYS:
            return b.conj(self.expand(f.args[0]), self.term(False, f))
        if op in (fm.UNTIL, fm.WEAK_UNTIL):
            left, right = self.expand(f.args[0]), self.expand(f.args[1])
            return b.disj(right, b.conj(left, self.term(op == fm.UNTIL, f)))
        if op == fm.RELEASE:
            left, right = self.expand(f.args[0]), self.expand(f.args[1])
            return b.conj(right, b.disj(left, self.term(False, f)))
        if op in (fm.BOUNDED_EVENTUALLY, fm.BOUNDED_ALWAYS):
            assert f.bounds is not None
            lo, hi = f.bounds
            sub = f.args[0]
            eventually = op == fm.BOUNDED_EVENTUALLY
            build = fm.Eventually if eventually else fm.Always
            if lo > 0:
                return self.term(eventually, build(sub, (lo - 1, hi - 1)))
            here = self.expand(sub)
            if hi == 0:
                return here
            later = self.term(eventually, build(sub, (0, hi - 1)))
            return b.disj(here, later) if eventually else b.conj(here, later)
        raise AssertionError(f'unknown operator {op!r}')

    # ---------------------------------------------------------- automaton
    def end_value(self, level: int) -> bool:
        return not self.level_strong[level - self.n_atoms]

    def successor_bdd(self, state: int) -> int:
        level_formula, n = self.level_formula, self.n_atoms
        return self.bdd.compose(state, lambda level: self.expand(level_formula[level - n]))

    def explore(self, max_states: int | None = None) -> tuple[list[int], list[int], dict[int, int], list[list[int]]]:
        """Breadth-first reachable states: (state BDDs, successor BDDs, index,
        per state its distinct successors in low-branch-first order);
        StateBudgetError past ``max_states``."""
        b = self.bdd
        initial = self.term(True, self.formula)
        states = [initial]
        index = {initial: 0}
        trans: list[int] = []
        successors: list[list[int]] = []
        queue = deque([initial])
        n = self.n_atoms
        while queue:
            s = queue.popleft()
            t = self.normalise_leaves(self.successor_bdd(s))
            trans.append(t)
            succ: list[int] = []
            successors.append(succ)
            stack = [t]
            seen: set[int] = set()
            while stack:  # leaves of the atom part, low branch first
                c = stack.pop()
                if c in seen:
                    continue
                seen.add(c)
                if c <= 1 or b.level[c] >= n:
                    if c not in index:
                        index[c] = len(states)
                        states.append(c)
                        queue.append(c)
                        if max_states is not None and len(states) > max_states:
                            raise StateBudgetError(len(states), len(trans), max_states)
                    succ.append(index[c])
                else:
                    stack.append(b.high[c])
                    stack.append(b.low[c])
        return states, trans, index, successors


def _refine(prog: _Progression, block: list[int], trans: list[int], index: dict[int, int],
            successors: list[list[int]]) -> list[int]:
    """The coarsest partition refining ``block`` (accepting or not) in which
    equivalent states have equivalent symbolic transitions.

    Moore's refinement, made incremental: a state's signature (its
    transition decision diagram with successor states replaced by their
    blocks) only changes when a successor changes block, so each round
    re-signs just the predecessors of the states that moved.  Blocks are
    uniform in signature after every round, so a block splits by comparing
    its re-signed members with the block's signature.  A chain of ``k``
    states thus costs ``O(k)`` signatures, not ``O(k²)``."""
    b, n = prog.bdd, prog.n_atoms
    interned: dict[tuple[object, ...], int] = {}   # persistent: keys name stable block ids

    def signer() -> Callable[[int], int]:
        memo: dict[int, int] = {}

        def sig(c: int) -> int:
            r = memo.get(c)
            if r is not None:
                return r
            if c <= 1 or b.level[c] >= n:
                key: tuple[object, ...] = ('L', block[index[c]])
            else:
                lo, hi = sig(b.low[c]), sig(b.high[c])
                if lo == hi:
                    memo[c] = lo
                    return lo
                key = (b.level[c], lo, hi)
            r = interned.setdefault(key, len(interned))
            memo[c] = r
            return r
        return sig

    predecessors: list[set[int]] = [set() for _ in trans]
    for i, succ in enumerate(successors):
        for j in succ:
            predecessors[j].add(i)
    members: dict[int, set[int]] = {}
    for i, blk in enumerate(block):
        members.setdefault(blk, set()).add(i)
    block_sig: dict[int, int] = {}
    next_id = max(block, default=-1) + 1
    dirty = set(range(len(trans)))
    while dirty:
        sig = signer()
        by_block: dict[int, dict[int, list[int]]] = {}
        for i in sorted(dirty):
            by_block.setdefault(block[i], {}).setdefault(sig(trans[i]), []).append(i)
        moved: list[int] = []
        for blk, groups in by_block.items():
            keep = block_sig.get(blk)
            if keep is None or (keep not in groups and len(members[blk]) == sum(map(len, groups.values()))):
                keep = next(iter(groups))     # every member re-signed: one group keeps the id
            block_sig[blk] = keep
            for s_, group in groups.items():
                if s_ == keep:
                    continue
                new_id, next_id = next_id, next_id + 1
                members[new_id] = set(group)
                members[blk].difference_update(group)
                block_sig[new_id] = s_
                for i in group:
                    block[i] = new_id
                moved += group
        dirty = set()
        for i in moved:
            dirty |= predecessors[i]
    return block


def _minimise(prog: _Progression, states: list[int], trans: list[int], index: dict[int, int],
              successors: list[list[int]]) -> DFA:
    b, n = prog.bdd, prog.n_atoms
    accepting = [b.evaluate(s, prog.end_value) for s in states]
    block = _refine(prog, [1 if a else 0 for a in accepting], trans, index, successors)

    # Breadth-first renumbering of blocks from the initial block, following
    # each representative's decision diagram low branch first.
    rep: dict[int, int] = {}
    for i, blk in enumerate(block):
        rep.setdefault(blk, i)
    order: dict[int, int] = {block[0]: 0}
    queue = deque([block[0]])
    node_atom: list[int] = []
    node_low: list[int] = []
    node_high: list[int] = []
    node_index: dict[tuple[int, int, int], int] = {}
    roots: dict[int, int] = {}

    while queue:
        blk = queue.popleft()
        for target in successors[rep[blk]]:
            target = block[target]
            if target not in order:
                order[target] = len(order)
                queue.append(target)

    def emit(c: int, memo: dict[int, int]) -> int:
        r = memo.get(c)
        if r is not None:
            return r
        if c <= 1 or b.level[c] >= n:
            r = ~order[block[index[c]]]
        else:
            lo, hi = emit(b.low[c], memo), emit(b.high[c], memo)
            if lo == hi:
                r = lo
            else:
                key = (b.level[c], lo, hi)
                r = node_index.get(key, -1)
                if r == -1:
                    r = len(node_atom)
                    node_index[key] = r
                    node_atom.append(b.level[c])
                    node_low.append(lo)
                    node_high.append(hi)
        memo[c] = r
        return r

    emit_memo: dict[int, int] = {}
    for blk, new_id in order.items():
        roots[new_id] = emit(trans[rep[blk]], emit_memo)
    num = len(order)
    acc = [False] * num
    for blk, new_id in order.items():
        acc[new_id] = accepting[rep[blk]]
    succ_new: list[list[int]] = [[] for _ in range(num)]
    for blk, new_id in order.items():
        seen: set[int] = set()
        for target in successors[rep[blk]]:
            t = order[block[target]]
            if t not in seen:
                seen.add(t)
                succ_new[new_id].append(t)
    return build_dfa(str(prog.formula), prog.atoms, 0, tuple(acc), tuple(roots[i] for i in range(num)),
                     tuple(node_atom), tuple(node_low), tuple(node_high), successors=succ_new)


CONSTRUCTIONS = ('auto', 'symbolic', 'explicit')
MAX_STATES = 500_000
"""The default budget of automaton states explored before a compile gives up
with :class:`~safemanip_ros.errors.StateBudgetError` (the nested window at
k = 100 has 176,853; ``G(a -> F[40,60] b)`` would need about 2^40)."""


def compile_formula(formula: Formula | str, construction: str = 'auto', max_states: int = MAX_STATES) -> DFA:
    """Compile an LTLf formula (object or text) to its minimal complete DFA.

    The DFA's atoms are the formula's atoms in sorted order; state 0 is the
    initial state; ``labels`` give each state's four-valued verdict.

    ``construction`` picks how (the result is the same automaton, node for
    node): ``'symbolic'`` (progression with BDDs, this module), ``'explicit'``
    (:mod:`.explicit`: explicit states, a layer of the breadth-first search
    per array pass; at most :data:`.explicit.MAX_ATOMS` atoms) or ``'auto'``:
    the faster of the two for the formula, by :func:`construction_for`.

    Raises:
        LtlfSyntaxError: when ``formula`` is text that does not parse.
        ValueError: an unknown ``construction``, or ``'explicit'`` for a
            formula it cannot tabulate (too many atoms, or more obligation
            combinations than its int64 keys hold).
    """
    return compile_reporting(formula, construction, max_states)[0]


def compile_reporting(formula: Formula | str, construction: str = 'auto',
                      max_states: int = MAX_STATES) -> tuple[DFA, str]:
    """:func:`compile_formula`, also saying which construction built the
    automaton (``'symbolic'`` or ``'explicit'``; ``'auto'`` compiles
    symbolically where :func:`construction_for` picks the explicit one but
    its keys would overflow)."""
    if construction not in CONSTRUCTIONS:
        raise ValueError(f'unknown construction {construction!r} (one of {", ".join(CONSTRUCTIONS)})')
    t0 = time.perf_counter()
    f = parse(formula) if isinstance(formula, str) else formula
    longest = max((g.bounds[1] for g in f.subformulas() if g.bounds is not None), default=0)
    if longest > max_states:        # a window of h frames has at least h states: refused before any work
        raise StateBudgetError(longest, 0, max_states)
    chosen = construction_for(f) if construction == 'auto' else construction
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20000))
    try:
        dfa = _compile_explicit(f, construction == 'explicit', max_states) if chosen == 'explicit' else None
        if dfa is None:
            chosen = 'symbolic'
            prog = _Progression(f)
            dfa = _minimise(prog, *prog.explore(max_states))
    finally:
        sys.setrecursionlimit(limit)
    return replace(dfa, compile_time_s=time.perf_counter() - t0), chosen


def construction_for(f: Formula) -> str:
    """The construction ``compile_formula(f, 'auto')`` uses.

    ``'explicit'`` where at most :data:`.explicit.MAX_ATOMS` atoms meet two
    or more independent window counters: bounded operators over different
    operands (``F[0,k] (b & F[0,k] c)`` has two), or one window that starts
    later (``F[l,h]``, ``l > 0``, keeps a counter per frame of its delay).
    Their states multiply, and the explicit construction expands a whole
    breadth-first layer per array pass.  ``'symbolic'`` otherwise: one
    window of any length (``F[0,10000] a``: a chain of states, one per
    layer, where per-layer array work does not pay) and formulas with many
    atoms (the symbolic compiler never enumerates letters)."""
    from .nnf import to_nnf

    counters: set[tuple[object, ...]] = set()
    for g in to_nnf(f).subformulas():
        if g.op in (fm.BOUNDED_EVENTUALLY, fm.BOUNDED_ALWAYS):
            assert g.bounds is not None
            lo, hi = g.bounds
            if hi > 0:
                counters.update((g.op, g.args[0], delay) for delay in range(max(lo, 1)))
    if len(counters) < 2:
        return 'symbolic'          # decided without importing numpy (the explicit modules need it)
    from .explicit import MAX_ATOMS
    return 'explicit' if len(f.atoms) <= MAX_ATOMS else 'symbolic'


def _compile_explicit(f: Formula, required: bool, max_states: int | None = None) -> DFA | None:
    """The explicit construction's DFA.  Where it cannot tabulate ``f`` (more
    obligation combinations than its int64 keys hold) that is an error if
    ``required``, else ``None``: ``'auto'`` then compiles symbolically."""
    from . import explicit, table  # numpy: imported only where used

    try:
        tables = explicit.tabulate(f)
        delay = max((g.bounds[0] for g in f.subformulas() if g.bounds is not None), default=0)
        explored = explicit.explore(tables, max_states, delay)
    except explicit.NotTabulable as err:
        if required:
            raise ValueError(f'the explicit construction cannot compile {f}: {err}') from err
        return None
    return table.minimal_dfa(str(f), tables.atoms, explored.delta, explored.accepting, breadth_first=True)
