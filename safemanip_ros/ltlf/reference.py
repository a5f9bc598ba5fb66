"""The reference toolchain SafeManip used (ltlf2dfa + MONA), for differential
tests and benchmarks — never needed at run time.

* :func:`to_ltlf2dfa` prints a formula in ltlf2dfa's syntax (fully
  parenthesised; ``W``, ``F[a,b]`` and ``G[a,b]`` rewritten by their
  definitions in SEMANTICS.md §2, since ltlf2dfa has none of them).
* :func:`mona_dfa` runs ``ltlf2dfa``'s ``to_dfa(mona_dfa_out=True)`` and parses
  MONA's raw automaton into :class:`MonaDFA`.
* :func:`counterexample` decides language equivalence of one of our DFAs and a
  MONA automaton by a breadth-first product construction and returns a
  shortest distinguishing trace, or ``None`` when they are equivalent.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass

import numpy as np

from . import formula as fm
from .dfa import DFA
from .formula import Formula
from .runtime import StepTable


def to_ltlf2dfa(f: Formula) -> str:
    """ltlf2dfa text for ``f`` (same language over non-empty traces)."""
    op = f.op
    if op == fm.ATOM:
        return f.name
    if op in (fm.TRUE, fm.FALSE, fm.LAST):
        return op
    if op == fm.NOT:
        return f'!({to_ltlf2dfa(f.args[0])})'
    if op in (fm.NEXT, fm.WEAK_NEXT, fm.EVENTUALLY, fm.ALWAYS):
        return f'{op}({to_ltlf2dfa(f.args[0])})'
    if op in (fm.BOUNDED_EVENTUALLY, fm.BOUNDED_ALWAYS):
        assert f.bounds is not None
        a, b = f.bounds
        sub = to_ltlf2dfa(f.args[0])
        eventually = op == fm.BOUNDED_EVENTUALLY
        nxt, join = ('X', '|') if eventually else ('WX', '&')
        inner = f'({sub})'
        for _ in range(b - a):
            inner = f'(({sub}) {join} {nxt}({inner}))'
        for _ in range(a):
            inner = f'{nxt}({inner})'
        return inner
    left, right = (to_ltlf2dfa(x) for x in f.args)
    if op == fm.WEAK_UNTIL:
        return f'((({left}) U ({right})) | G({left}))'
    return f'(({left}) {op} ({right}))'


@dataclass(frozen=True)
class MonaDFA:
    """MONA's automaton: state 0 is pre-initial and reads one dummy letter.

    ``transitions[s]`` lists (pattern, target) with one character per atom in
    ``atoms`` order: '0', '1' or 'X' (either).
    """

    atoms: tuple[str, ...]
    initial: int
    accepting: frozenset[int]
    transitions: tuple[tuple[tuple[str, int], ...], ...]

    def table(self, atom_order: tuple[str, ...]) -> np.ndarray:
        """Dense ``int32[num_states, 2**k]`` table over letters bit-packed in ``atom_order``."""
        k = len(atom_order)
        pos = [atom_order.index(a) for a in self.atoms]
        letters = np.arange(1 << k, dtype=np.int64)
        n = len(self.transitions)
        out = np.full((n, 1 << k), -1, dtype=np.int32)
        for s, rules in enumerate(self.transitions):
            for pattern, target in rules:
                mask = np.ones(1 << k, dtype=bool)
                for ch, p in zip(pattern, pos):
                    if ch != 'X':
                        mask &= ((letters >> p) & 1) == int(ch)
                out[s, mask] = target
        if (out < 0).any():
            raise ValueError('MONA automaton is not complete')
        return out


_HEADER = re.compile(r'DFA for formula with free variables:(?P<vars>[^\n]*)\n')
_INITIAL = re.compile(r'Initial state: (\d+)')
_ACCEPTING = re.compile(r'Accepting states:([^\n]*)')
_COUNT = re.compile(r'Automaton has (\d+) states?')
_TRANS = re.compile(r'State (\d+): ([01X]*) -> state (\d+)')


def parse_mona(text: str) -> MonaDFA:
    """Parse MONA's textual DFA (as printed by ``mona -q`` / ltlf2dfa)."""
    header = _HEADER.search(text)
    if header is None:
        raise ValueError(f'not a MONA DFA:\n{text[:500]}')
    atoms = tuple(v.lower() for v in header.group('vars').split())
    initial = int(_INITIAL.search(text).group(1))  # type: ignore[union-attr]
    accepting = frozenset(int(s) for s in _ACCEPTING.search(text).group(1).split())  # type: ignore[union-attr]
    count = int(_COUNT.search(text).group(1))  # type: ignore[union-attr]
    rules: list[list[tuple[str, int]]] = [[] for _ in range(count)]
    for m in _TRANS.finditer(text):
        rules[int(m.group(1))].append((m.group(2), int(m.group(3))))
    return MonaDFA(atoms, initial, accepting, tuple(tuple(r) for r in rules))


_LTLF2DFA_PARSER = None


def mona_dfa(f: Formula) -> MonaDFA:
    """Compile ``f`` with ltlf2dfa + MONA (needs the ``mona`` binary on PATH)."""
    global _LTLF2DFA_PARSER
    if _LTLF2DFA_PARSER is None:
        from ltlf2dfa.parser.ltlf import LTLfParser  # reference tool, imported lazily
        _LTLF2DFA_PARSER = LTLfParser()
    out = _LTLF2DFA_PARSER(to_ltlf2dfa(f)).to_dfa(mona_dfa_out=True)
    return parse_mona(out)


def counterexample(dfa: DFA, mona: MonaDFA) -> list[frozenset[str]] | None:
    """A shortest non-empty trace on which ``dfa`` and ``mona`` disagree, or ``None``.

    Complete: explores the whole product of the two automata, so ``None`` is
    a proof of language equivalence over non-empty traces.
    """
    atoms = tuple(sorted(set(dfa.atoms) | set(mona.atoms)))
    k = len(atoms)
    # Our DFA's table over the union alphabet: project letters onto its atoms.
    ours = StepTable.from_dfa(dfa, max_table_atoms=30)
    letters = np.arange(1 << k, dtype=np.int64)
    projected = np.zeros(1 << k, dtype=np.int64)
    for j, a in enumerate(dfa.atoms):
        projected |= ((letters >> atoms.index(a)) & 1) << j
    their = mona.table(atoms)
    start_mona = their[mona.initial, 0]  # the dummy letter; MONA ignores its value
    if len(set(their[mona.initial].tolist())) != 1:
        raise ValueError('MONA pre-initial state depends on the dummy letter')
    start = (dfa.initial, int(start_mona))
    # The start pair stands for the empty trace, which LTLf excludes: it is
    # checked only when reached again by a non-empty trace.
    parent: dict[tuple[int, int], tuple[tuple[int, int], int, int]] = {}
    queue = deque([(start, 0)])
    while queue:
        pair, depth = queue.popleft()
        s, m = pair
        nxt_ours = ours.step_many(np.full(1 << k, s, dtype=np.int64), projected)
        nxt_mona = their[m]
        for letter in range(1 << k):
            succ = (int(nxt_ours[letter]), int(nxt_mona[letter]))
            if succ in parent:
                continue
            parent[succ] = (pair, letter, depth + 1)
            if dfa.accepting[succ[0]] != (succ[1] in mona.accepting):
                trace: list[frozenset[str]] = []
                node = succ
                for _ in range(depth + 1):
                    prev, let, _d = parent[node]
                    trace.append(frozenset(a for j, a in enumerate(atoms) if (let >> j) & 1))
                    node = prev
                return trace[::-1]
            queue.append((succ, depth + 1))
    return None
