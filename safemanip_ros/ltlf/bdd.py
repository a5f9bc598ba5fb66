"""A small reduced ordered binary decision diagram (ROBDD) package.

Only what the LTLf compiler needs: a unique table, negation, conjunction,
disjunction, if-then-else and vector composition.  Nodes are integers; ``0``
and ``1`` are the terminals.  A variable's *level* is its position in the
order (smaller levels nearer the root).  The compiler gives atoms the lowest
levels and next-state obligations the higher ones, so the part of a
transition BDD above the first obligation variable is exactly a decision
diagram over the letter, and the sub-BDDs where it stops are the successor
states.
"""

from __future__ import annotations

from typing import Callable, Mapping

FALSE_NODE = 0
TRUE_NODE = 1
_TERMINAL_LEVEL = 1 << 60


class BDD:
    """A manager owning every node; nodes of different managers never mix."""

    def __init__(self) -> None:
        # Node i is (level[i], low[i], high[i]); terminals sit at an infinite level.
        self.level: list[int] = [_TERMINAL_LEVEL, _TERMINAL_LEVEL]
        self.low: list[int] = [0, 1]
        self.high: list[int] = [0, 1]
        self._unique: dict[tuple[int, int, int], int] = {}
        self._and_cache: dict[tuple[int, int], int] = {}
        self._not_cache: dict[int, int] = {}
        self._ite_cache: dict[tuple[int, int, int], int] = {}

    def __len__(self) -> int:
        return len(self.level)

    def node(self, level: int, low: int, high: int) -> int:
        """The unique node testing ``level`` (``low`` if false, ``high`` if true)."""
        if low == high:
            return low
        key = (level, low, high)
        n = self._unique.get(key)
        if n is None:
            n = len(self.level)
            self.level.append(level)
            self.low.append(low)
            self.high.append(high)
            self._unique[key] = n
        return n

    def var(self, level: int) -> int:
        return self.node(level, FALSE_NODE, TRUE_NODE)

    def neg(self, f: int) -> int:
        if f <= 1:
            return 1 - f
        r = self._not_cache.get(f)
        if r is None:
            r = self.node(self.level[f], self.neg(self.low[f]), self.neg(self.high[f]))
            self._not_cache[f] = r
            self._not_cache[r] = f
        return r

    def conj(self, f: int, g: int) -> int:
        if f == 0 or g == 0:
            return 0
        if f == 1:
            return g
        if g == 1 or f == g:
            return f
        if f > g:
            f, g = g, f
        key = (f, g)
        r = self._and_cache.get(key)
        if r is not None:
            return r
        lf, lg = self.level[f], self.level[g]
        if lf == lg:
            r = self.node(lf, self.conj(self.low[f], self.low[g]), self.conj(self.high[f], self.high[g]))
        elif lf < lg:
            r = self.node(lf, self.conj(self.low[f], g), self.conj(self.high[f], g))
        else:
            r = self.node(lg, self.conj(f, self.low[g]), self.conj(f, self.high[g]))
        self._and_cache[key] = r
        return r

    def disj(self, f: int, g: int) -> int:
        return self.neg(self.conj(self.neg(f), self.neg(g)))

    def ite(self, f: int, g: int, h: int) -> int:
        """``(f & g) | (!f & h)``."""
        if f == 1:
            return g
        if f == 0:
            return h
        if g == h:
            return g
        if g == 1 and h == 0:
            return f
        if g == 0 and h == 1:
            return self.neg(f)
        key = (f, g, h)
        r = self._ite_cache.get(key)
        if r is not None:
            return r
        top = min(self.level[f], self.level[g], self.level[h])
        f0, f1 = self._cofactors(f, top)
        g0, g1 = self._cofactors(g, top)
        h0, h1 = self._cofactors(h, top)
        r = self.node(top, self.ite(f0, g0, h0), self.ite(f1, g1, h1))
        self._ite_cache[key] = r
        return r

    def _cofactors(self, f: int, level: int) -> tuple[int, int]:
        if self.level[f] == level:
            return self.low[f], self.high[f]
        return f, f

    def compose(self, f: int, substitution: Callable[[int], int] | Mapping[int, int]) -> int:
        """Replace every variable level ``v`` of ``f`` by the BDD ``substitution(v)``.

        All variables of ``f`` are substituted simultaneously.
        """
        get = substitution.__getitem__ if isinstance(substitution, Mapping) else substitution
        memo: dict[int, int] = {0: 0, 1: 1}

        def rec(n: int) -> int:
            r = memo.get(n)
            if r is None:
                r = self.ite(get(self.level[n]), rec(self.high[n]), rec(self.low[n]))
                memo[n] = r
            return r

        return rec(f)

    def evaluate(self, f: int, value_of_level: Callable[[int], bool]) -> bool:
        """The truth value of ``f`` under a total assignment."""
        while f > 1:
            f = self.high[f] if value_of_level(self.level[f]) else self.low[f]
        return f == 1
