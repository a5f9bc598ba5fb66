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
* States are minimised by partition refinement on these symbolic transitions
  and renumbered breadth-first, so the result is the unique minimal DFA with
  a deterministic numbering.
"""

from __future__ import annotations

import sys
import time
from collections import deque

from . import formula as fm
from .bdd import BDD
from .dfa import DFA, build_dfa
from .formula import Formula
from .parser import parse

COMPILER_VERSION = 1


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
        return self.bdd.var(level)

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

    def explore(self) -> tuple[list[int], list[int], dict[int, int], list[list[int]]]:
        """Breadth-first reachable states: (state BDDs, successor BDDs, index,
        per state its distinct successors in low-branch-first order)."""
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
            t = self.successor_bdd(s)
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
                    succ.append(index[c])
                else:
                    stack.append(b.high[c])
                    stack.append(b.low[c])
        return states, trans, index, successors


def _minimise(prog: _Progression, states: list[int], trans: list[int], index: dict[int, int],
              successors: list[list[int]]) -> DFA:
    b, n = prog.bdd, prog.n_atoms
    accepting = [b.evaluate(s, prog.end_value) for s in states]
    block = [1 if a else 0 for a in accepting]
    num_blocks = len(set(block))
    while True:
        interned: dict[tuple, int] = {}
        memo: dict[int, int] = {}

        def sig(c: int) -> int:
            r = memo.get(c)
            if r is not None:
                return r
            if c <= 1 or b.level[c] >= n:
                key: tuple = ('L', block[index[c]])
            else:
                lo, hi = sig(b.low[c]), sig(b.high[c])
                if lo == hi:
                    memo[c] = lo
                    return lo
                key = (b.level[c], lo, hi)
            r = interned.setdefault(key, len(interned))
            memo[c] = r
            return r

        sigs = [(block[i], sig(trans[i])) for i in range(len(states))]
        renumber: dict[tuple[int, int], int] = {}
        new_block = [renumber.setdefault(s, len(renumber)) for s in sigs]
        if len(renumber) == num_blocks:
            break
        block, num_blocks = new_block, len(renumber)

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


def compile_formula(formula: Formula | str) -> DFA:
    """Compile an LTLf formula (object or text) to its minimal complete DFA.

    The DFA's atoms are the formula's atoms in sorted order; state 0 is the
    initial state; ``labels`` give each state's four-valued verdict.

    Raises:
        LtlfSyntaxError: when ``formula`` is text that does not parse.
    """
    t0 = time.perf_counter()
    f = parse(formula) if isinstance(formula, str) else formula
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20000))
    try:
        prog = _Progression(f)
        dfa = _minimise(prog, *prog.explore())
    finally:
        sys.setrecursionlimit(limit)
    return DFA(dfa.formula, dfa.atoms, dfa.initial, dfa.accepting, dfa.labels, dfa.root, dfa.node_atom,
               dfa.node_low, dfa.node_high, time.perf_counter() - t0)
