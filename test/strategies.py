"""Hypothesis strategies for LTLf formulas and traces."""

from __future__ import annotations

from hypothesis import strategies as st

from safemanip_ros.ltlf import formula as fm

ATOMS = ('a', 'b', 'c', 'd', 'e')


def formulas(atoms: tuple[str, ...] = ATOMS, max_leaves: int = 8, max_bound: int = 3):
    leaves = st.one_of(
        st.sampled_from([fm.Atom(a) for a in atoms]),
        st.sampled_from([fm.TT, fm.FF, fm.LAST_F]),
    )

    def extend(children):
        bounds = st.tuples(st.integers(0, max_bound), st.integers(0, max_bound)).map(lambda t: (min(t), max(t)))
        unary = st.one_of(
            children.map(fm.Not), children.map(fm.Next), children.map(fm.WeakNext),
            children.map(fm.Eventually), children.map(fm.Always),
            st.builds(lambda f, b: fm.Eventually(f, b), children, bounds),
            st.builds(lambda f, b: fm.Always(f, b), children, bounds),
        )
        binary = st.builds(lambda op, f, g: op(f, g),
                           st.sampled_from([fm.Until, fm.WeakUntil, fm.Release, fm.And, fm.Or, fm.Implies, fm.Iff]),
                           children, children)
        return st.one_of(unary, binary)

    return st.recursive(leaves, extend, max_leaves=max_leaves)


def traces(atoms: tuple[str, ...] = ATOMS, max_len: int = 12):
    step = st.frozensets(st.sampled_from(atoms))
    return st.lists(step, min_size=1, max_size=max_len)
