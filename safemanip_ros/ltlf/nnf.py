"""Negation normal form of LTLf formulas: negations on atoms only.

Over finite traces every operator has a dual (SEMANTICS.md §2): ``!X φ ≡ WX !φ``,
``!(φ U ψ) ≡ !φ R !ψ``, ``!(φ W ψ) ≡ !ψ U (!φ & !ψ)``, ``!F φ ≡ G !φ``,
``!F[a,b] φ ≡ G[a,b] !φ``, ``!last ≡ X true``; ``->`` and ``<->`` are
expanded.  The explicit construction (:mod:`.explicit`) needs it: there every
next-step obligation occurs positively.
"""

from __future__ import annotations

from typing import Callable

from . import formula as fm
from .formula import Formula

_Rec = Callable[[Formula, bool], Formula]


def to_nnf(f: Formula) -> Formula:
    """An equivalent formula whose negations all sit on atoms (LTLf over
    finite traces: ``!X φ ≡ WX !φ``, ``!(φ U ψ) ≡ !φ R !ψ``,
    ``!(φ W ψ) ≡ !ψ U (!φ & !ψ)``, ``!F[a,b] φ ≡ G[a,b] !φ``, ``!last ≡ X true``)."""
    memo: dict[tuple[Formula, bool], Formula] = {}

    def rec(g: Formula, neg: bool) -> Formula:
        key = (g, neg)
        r = memo.get(key)
        if r is None:
            r = _nnf(g, neg, rec)
            memo[key] = r
        return r

    return rec(f, False)


def _nnf(g: Formula, neg: bool, rec: _Rec) -> Formula:
    op, args = g.op, g.args
    if op == fm.TRUE:
        return fm.FF if neg else fm.TT
    if op == fm.FALSE:
        return fm.TT if neg else fm.FF
    if op == fm.ATOM:
        return fm.Not(g) if neg else g
    if op == fm.LAST:
        return fm.Next(fm.TT) if neg else fm.WeakNext(fm.FF)
    if op == fm.NOT:
        negated: Formula = rec(args[0], not neg)
        return negated
    if op in (fm.AND, fm.OR):
        both = (rec(args[0], neg), rec(args[1], neg))
        return fm.And(*both) if (op == fm.AND) != neg else fm.Or(*both)
    if op == fm.IMPLIES:
        if neg:
            return fm.And(rec(args[0], False), rec(args[1], True))
        return fm.Or(rec(args[0], True), rec(args[1], False))
    if op == fm.IFF:
        x, y = args
        if neg:
            return fm.Or(fm.And(rec(x, False), rec(y, True)), fm.And(rec(x, True), rec(y, False)))
        return fm.Or(fm.And(rec(x, False), rec(y, False)), fm.And(rec(x, True), rec(y, True)))
    if op == fm.NEXT:
        return fm.WeakNext(rec(args[0], True)) if neg else fm.Next(rec(args[0], False))
    if op == fm.WEAK_NEXT:
        return fm.Next(rec(args[0], True)) if neg else fm.WeakNext(rec(args[0], False))
    if op == fm.EVENTUALLY:
        return fm.Always(rec(args[0], True)) if neg else fm.Eventually(rec(args[0], False))
    if op == fm.ALWAYS:
        return fm.Eventually(rec(args[0], True)) if neg else fm.Always(rec(args[0], False))
    if op == fm.BOUNDED_EVENTUALLY:
        return fm.Always(rec(args[0], True), g.bounds) if neg else fm.Eventually(rec(args[0], False), g.bounds)
    if op == fm.BOUNDED_ALWAYS:
        return fm.Eventually(rec(args[0], True), g.bounds) if neg else fm.Always(rec(args[0], False), g.bounds)
    x, y = args
    if op == fm.UNTIL:
        return fm.Release(rec(x, True), rec(y, True)) if neg else fm.Until(rec(x, False), rec(y, False))
    if op == fm.RELEASE:
        return fm.Until(rec(x, True), rec(y, True)) if neg else fm.Release(rec(x, False), rec(y, False))
    if op == fm.WEAK_UNTIL:
        if neg:
            not_y = rec(y, True)
            return fm.Until(not_y, fm.And(rec(x, True), not_y))
        return fm.WeakUntil(rec(x, False), rec(y, False))
    raise AssertionError(f'unknown operator {op!r}')
