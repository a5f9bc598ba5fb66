"""SafeManip's runtime representation, shared by the benchmarks: each DFA
state's outgoing edges with their guards as compiled Python expressions,
to be ``eval``'d against a frame's predicate dict (first true guard wins)."""

from __future__ import annotations

from types import CodeType

EVAL_GLOBALS = {'true': True, 'false': False}


def guard_edges(dfa) -> list[list[tuple[CodeType, int]]]:
    """Per state, (compiled guard, target) for every outgoing edge."""
    rows = []
    for s in dfa.states:
        row = []
        for target, guard in dfa.guard_text(s).items():
            expr = guard.replace('!', ' not ').replace('&', ' and ').replace('|', ' or ').strip()
            row.append((compile(expr, '<guard>', 'eval'), target))
        rows.append(row)
    return rows
