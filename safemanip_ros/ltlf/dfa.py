"""Symbolic deterministic finite automata over the letters of an atom set.

A letter is a truth assignment to ``atoms``; as an integer, bit ``j`` is the
value of ``atoms[j]``.  Transitions are stored as one shared decision diagram:
``node_atom[n]`` is the index of the atom node ``n`` tests, ``node_low[n]`` /
``node_high[n]`` are the children for false / true.  A child ``c >= 0`` is
another node; ``c < 0`` is the leaf "go to state ``~c``".  ``root[s]`` is
state ``s``'s entry (node or leaf).  This keeps formulas with many atoms
small: a state only tests the atoms its successors depend on.

Every DFA is complete (each letter leads somewhere) and, when it comes from
:func:`~safemanip_ros.ltlf.compiler.compile_formula`, minimal with states
numbered in breadth-first order from the initial state (lower atoms first),
so equal formulas always give identical automata.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Iterable, Iterator, Mapping, Sequence

from .verdict import Verdict


@dataclass(frozen=True, eq=False)
class DFA:
    """A complete DFA with a four-valued verdict label on every state.

    Attributes:
        formula: canonical text of the formula it was compiled from ('' if none).
        atoms: atom names, bit ``j`` of a letter is ``atoms[j]``.
        initial: initial state (reads the first letter of the trace).
        accepting: per state, whether a trace ending there is accepted.
        labels: per state, its :class:`Verdict`.
        root, node_atom, node_low, node_high: the transition decision diagram.
        compile_time_s: seconds spent compiling (0 when loaded from cache).
    """

    formula: str
    atoms: tuple[str, ...]
    initial: int
    accepting: tuple[bool, ...]
    labels: tuple[Verdict, ...]
    root: tuple[int, ...]
    node_atom: tuple[int, ...]
    node_low: tuple[int, ...]
    node_high: tuple[int, ...]
    compile_time_s: float = field(default=0.0, compare=False)

    @property
    def num_states(self) -> int:
        return len(self.root)

    @property
    def states(self) -> range:
        return range(len(self.root))

    @cached_property
    def atom_index(self) -> dict[str, int]:
        return {a: j for j, a in enumerate(self.atoms)}

    def step(self, state: int, letter: int) -> int:
        """Successor of ``state`` on the letter given as a bit-packed integer."""
        c = self.root[state]
        atom, low, high = self.node_atom, self.node_low, self.node_high
        while c >= 0:
            c = high[c] if (letter >> atom[c]) & 1 else low[c]
        return ~c

    def letter(self, step: Mapping[str, bool] | Iterable[str]) -> int:
        """Bit-pack one trace step: a mapping atom → bool (missing atoms are
        false) or an iterable of the atoms that are true.  Atoms the formula
        does not mention are ignored."""
        index = self.atom_index
        bits = 0
        if isinstance(step, Mapping):
            for name, value in step.items():
                j = index.get(name)
                if j is not None and value:
                    bits |= 1 << j
        else:
            for name in step:
                j = index.get(name)
                if j is not None:
                    bits |= 1 << j
        return bits

    def run(self, letters: Iterable[int], state: int | None = None) -> list[int]:
        """States after each letter, starting from ``state`` (default initial)."""
        s = self.initial if state is None else state
        out = []
        for letter in letters:
            s = self.step(s, letter)
            out.append(s)
        return out

    def accepts(self, letters: Sequence[int]) -> bool:
        """Whether the non-empty trace of bit-packed letters satisfies the formula."""
        if not letters:
            raise ValueError('LTLf traces are non-empty')
        return self.accepting[self.run(letters)[-1]]

    def successors(self, state: int) -> list[int]:
        """Distinct successor states of ``state`` (depth-first, false branch first)."""
        out: list[int] = []
        found: set[int] = set()
        visited: set[int] = set()
        stack = [self.root[state]]
        while stack:
            c = stack.pop()
            if c < 0:
                if ~c not in found:
                    found.add(~c)
                    out.append(~c)
            elif c not in visited:
                visited.add(c)
                stack.append(self.node_high[c])
                stack.append(self.node_low[c])
        return out

    def guards(self, state: int) -> Iterator[tuple[tuple[tuple[int, bool], ...], int]]:
        """Paths of the decision diagram from ``state``: (cube, target) where a
        cube is a tuple of (atom index, value) tests, false branch first."""
        stack: list[tuple[int, tuple[tuple[int, bool], ...]]] = [(self.root[state], ())]
        while stack:
            c, cube = stack.pop()
            if c < 0:
                yield cube, ~c
                continue
            j = self.node_atom[c]
            stack.append((self.node_high[c], cube + ((j, True),)))
            stack.append((self.node_low[c], cube + ((j, False),)))

    def guard_text(self, state: int) -> dict[int, str]:
        """Per target state, a propositional guard over the atoms (DNF text)."""
        cubes: dict[int, list[str]] = {}
        for cube, target in self.guards(state):
            text = ' & '.join(a if v else f'!{a}' for a, v in
                              ((self.atoms[j], v) for j, v in cube)) or 'true'
            cubes.setdefault(target, []).append(text)
        out = {}
        for target, terms in cubes.items():
            if len(terms) == 1:
                out[target] = terms[0]
            else:
                out[target] = ' | '.join(f'({t})' if '&' in t else t for t in terms)
        return out

    # ----------------------------------------------------------------- export
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description: states with labels and guarded transitions."""
        return {
            'formula': self.formula,
            'atoms': list(self.atoms),
            'initial': self.initial,
            'num_states': self.num_states,
            'accepting_states': [s for s in self.states if self.accepting[s]],
            'states': [
                {
                    'id': s,
                    'accepting': self.accepting[s],
                    'label': self.labels[s].text,
                    'transitions': [{'to': t, 'guard': g} for t, g in sorted(self.guard_text(s).items())],
                }
                for s in self.states
            ],
            'diagram': {
                'root': list(self.root),
                'node_atom': list(self.node_atom),
                'node_low': list(self.node_low),
                'node_high': list(self.node_high),
            },
        }

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> 'DFA':
        """Rebuild from :meth:`to_dict` output (labels are recomputed)."""
        d = data['diagram']
        accepting = [False] * len(d['root'])
        for s in data['accepting_states']:
            accepting[s] = True
        return build_dfa(data.get('formula', ''), tuple(data['atoms']), int(data['initial']),
                         tuple(accepting), tuple(d['root']), tuple(d['node_atom']),
                         tuple(d['node_low']), tuple(d['node_high']))

    def to_dot(self) -> str:
        """Graphviz DOT text; accepting states are double circles, each state
        shows its verdict label."""
        colours = {Verdict.TRUE: 'palegreen', Verdict.FALSE: 'lightpink',
                   Verdict.PRESUMABLY_TRUE: 'honeydew', Verdict.PRESUMABLY_FALSE: 'mistyrose'}
        lines = ['digraph DFA {', '  rankdir=LR;', f'  label={json.dumps(self.formula)};',
                 '  node [style=filled, fontname="Helvetica"];', '  __start [shape=point];',
                 f'  __start -> {self.initial};']
        for s in self.states:
            shape = 'doublecircle' if self.accepting[s] else 'circle'
            lines.append(f'  {s} [shape={shape}, fillcolor={colours[self.labels[s]]}, '
                         f'label="{s}\\n{self.labels[s].text}"];')
        for s in self.states:
            for t, g in sorted(self.guard_text(s).items()):
                lines.append(f'  {s} -> {t} [label={json.dumps(g)}];')
        lines.append('}')
        return '\n'.join(lines) + '\n'


def compute_labels(accepting: Sequence[bool], successors: Sequence[Sequence[int]]) -> tuple[Verdict, ...]:
    """Four-valued labels from acceptance and the successor relation."""
    n = len(accepting)
    preds: list[list[int]] = [[] for _ in range(n)]
    for s, succ in enumerate(successors):
        for t in succ:
            preds[t].append(s)

    def backward(seeds: list[int]) -> list[bool]:
        mark = [False] * n
        stack = list(seeds)
        for s in seeds:
            mark[s] = True
        while stack:
            t = stack.pop()
            for s in preds[t]:
                if not mark[s]:
                    mark[s] = True
                    stack.append(s)
        return mark

    reaches_accept = backward([s for s in range(n) if accepting[s]])
    reaches_reject = backward([s for s in range(n) if not accepting[s]])
    labels = []
    for s in range(n):
        if not reaches_reject[s]:
            labels.append(Verdict.TRUE)
        elif not reaches_accept[s]:
            labels.append(Verdict.FALSE)
        else:
            labels.append(Verdict.PRESUMABLY_TRUE if accepting[s] else Verdict.PRESUMABLY_FALSE)
    return tuple(labels)


def build_dfa(formula: str, atoms: tuple[str, ...], initial: int, accepting: tuple[bool, ...],
              root: tuple[int, ...], node_atom: tuple[int, ...], node_low: tuple[int, ...],
              node_high: tuple[int, ...], compile_time_s: float = 0.0,
              successors: Sequence[Sequence[int]] | None = None) -> DFA:
    """Assemble a :class:`DFA`, computing its verdict labels (from
    ``successors`` when the caller already knows them)."""
    if successors is None:
        skeleton = DFA(formula, atoms, initial, accepting, tuple(Verdict.FALSE for _ in root), root,
                       node_atom, node_low, node_high)
        successors = [skeleton.successors(s) for s in skeleton.states]
    labels = compute_labels(accepting, successors)
    return DFA(formula, atoms, initial, accepting, labels, root, node_atom, node_low, node_high, compile_time_s)
