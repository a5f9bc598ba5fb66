"""A direct, obviously-correct evaluator of SEMANTICS.md §2 over a finite
trace — the oracle the compiled automata are tested against."""

from __future__ import annotations

from functools import lru_cache

from safemanip_ros.ltlf import formula as fm
from safemanip_ros.ltlf.formula import Formula


def holds(f: Formula, trace: list[frozenset[str]], i: int = 0) -> bool:
    n = len(trace)

    @lru_cache(maxsize=None)
    def h(f: Formula, i: int) -> bool:
        op = f.op
        if op == fm.TRUE:
            return True
        if op == fm.FALSE:
            return False
        if op == fm.ATOM:
            return f.name in trace[i]
        if op == fm.LAST:
            return i + 1 == n
        if op == fm.NOT:
            return not h(f.args[0], i)
        if op == fm.AND:
            return h(f.args[0], i) and h(f.args[1], i)
        if op == fm.OR:
            return h(f.args[0], i) or h(f.args[1], i)
        if op == fm.IMPLIES:
            return (not h(f.args[0], i)) or h(f.args[1], i)
        if op == fm.IFF:
            return h(f.args[0], i) == h(f.args[1], i)
        if op == fm.NEXT:
            return i + 1 < n and h(f.args[0], i + 1)
        if op == fm.WEAK_NEXT:
            return i + 1 == n or h(f.args[0], i + 1)
        if op == fm.EVENTUALLY:
            return any(h(f.args[0], j) for j in range(i, n))
        if op == fm.ALWAYS:
            return all(h(f.args[0], j) for j in range(i, n))
        if op == fm.UNTIL:
            return any(h(f.args[1], j) and all(h(f.args[0], k) for k in range(i, j)) for j in range(i, n))
        if op == fm.WEAK_UNTIL:
            return h(fm.Until(*f.args), i) or all(h(f.args[0], j) for j in range(i, n))
        if op == fm.RELEASE:
            return not h(fm.Until(fm.Not(f.args[0]), fm.Not(f.args[1])), i)
        if op == fm.BOUNDED_EVENTUALLY:
            a, b = f.bounds
            return any(h(f.args[0], j) for j in range(i + a, min(i + b, n - 1) + 1))
        if op == fm.BOUNDED_ALWAYS:
            a, b = f.bounds
            return all(h(f.args[0], j) for j in range(i + a, min(i + b, n - 1) + 1))
        raise AssertionError(op)

    return h(f, i)
