"""SpecRLBench's specification families, in our formula syntax.

The fixed sets are the paper's evaluation table (its Table 5): Letter and
Zone single-agent finite-horizon specifications in and out of the training
distribution (``ind``, ``ood``), infinite-horizon response (``rsp``),
recurrence (``rec``) and persistence (``per``); the Arm (grippers and arm)
finite sets; the two-agent Zone compositions (``indep``, ``coop``, ``mix``,
and infinite ``rsp``, ``rec``, ``per``).  Zone and Arm atoms: b, g, m, y =
blue, green, magenta, yellow; a trailing digit is the agent; Arm's ``gX`` /
``aX`` are the grippers / the arm in zone X.  Formulas are written fully
parenthesised (the paper's text leaves some precedence implicit, e.g.
``(b0 ∧ b1) ∧ ¬(y0 ∨ y1) U (g0 ∧ g1)``: read as ``… ∧ (¬(y0 ∨ y1) U …)``).

The sampled families are the paper's Letter complexity study (its Table 6):
reach-only ``F(x1 ∧ F(x2 ∧ …))`` and reach-avoid ``¬v1 U (x1 ∧ (¬v2 U (x2 ∧
…)))`` with ``n_seq`` (2–10) steps, each goal and avoid set a disjunction of
``n_disj + 1`` letters.  Letters are drawn with a seeded generator: within a
step, goal and avoid letters are distinct; across steps they may repeat
(ten steps of two-letter sets need more than twelve letters).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

LETTERS = tuple('abcdefghijkl')
"""LetterWorld's propositions."""


@dataclass(frozen=True)
class Spec:
    """One specification: its name, formula, whether SpecRLBench reads it as
    finite-horizon (success when satisfied) or infinite-horizon (violation
    and accepting visits only), and its family."""

    name: str
    formula: str
    finite: bool
    family: str


def _fixed(family: str, finite: bool, formulas: list[str]) -> list[Spec]:
    return [Spec(f'{family}_{k + 1:02d}', f, finite, family) for k, f in enumerate(formulas)]


FIXED: dict[str, list[Spec]] = {
    'letter_ind': _fixed('letter_ind', True, [
        '!(a | b) U (c & (!(d | e) U f))',
        '!(c | d) U ((!e U l) & F g)',
        '!d U ((e | k) & (!g U (h & F i)))',
        '!(e | f) U (g & F (h & (!i U j)))',
    ]),
    'letter_ood': _fixed('letter_ood', True, [
        'F a & (!(b | c) U (d & F (e & (!f U (g & F h)))))',
        '(!a U b) & (!(c | d) U (e & F (f & (!g U (h & F i)))))',
        '!b U ((c | d) & (!e U (f & F (g & (!h U (i & F l))))))',
        '!(c | d) U (e & (!f U (g & F (h & (!i U (j & F k))))))',
        'F b & (!(c | d) U (e & F f))',
        '!d U ((e | f) & (!g U (h & F (i & (!j U (k & F l))))))',
    ]),
    'letter_rsp': _fixed('letter_rsp', False, [
        'G F a & G (a -> (F (b & F c) & (!d U e))) & G !(f | g | h | i)',
        'G F f & G (f -> (F (e & F d) & (!c U b))) & G !(a | g | h | i)',
        'G F i & G (i -> (F (h & F g) & (!b U a))) & G !(c | d | e | f)',
    ]),
    'letter_rec': _fixed('letter_rec', False, [
        'G F a & G F b & G F c & G F d & G F e & G !(f | g | h | i | j | k)',
        'G F f & G F g & G F h & G F i & G F j & G !(a | b | c | d | e | k)',
        'G F k & G F a & G F b & G F c & G F d & G !(e | f | g | h | i | j)',
    ]),
    'zone_ind': _fixed('zone_ind', True, [
        'F y & (!(y | g) U (b & F m))',
        '!(g | y) U ((!g U m) & F b)',
        '!g U ((b | m) & (!g U (y & F b)))',
        '!(g | m) U (b & F (m & (!y U g)))',
    ]),
    'zone_ood': _fixed('zone_ood', True, [
        'F y & (!(y | g) U (b & F (m & (!y U (g & F b)))))',
        '(!g U b) & (!(b | y) U (m & F (g & (!y U (b & F m)))))',
        '!g U ((b | m) & (!g U (y & F (b & (!y U (m & F b))))))',
        '!(y | m) U (b & (!y U (g & F (m & (!g U (y & F b))))))',
        '!(g | y) U (m & (!g U b))',
        '!m U ((y | g) & (!m U (b & F (m & (!b U (g & F y))))))',
    ]),
    'zone_rsp': _fixed('zone_rsp', False, [
        'G F b & G (b -> F g) & G !(y | m)',
        'G F g & G (g -> F y) & G !(b | m)',
        'G F m & G (m -> F y) & G !(g | b)',
    ]),
    'zone_rec': _fixed('zone_rec', False, [
        'G F b & G F g & G !(y | m)',
        'G F g & G F y & G !(b | m)',
        'G F m & G F y & G !(g | b)',
    ]),
    'zone_per': _fixed('zone_per', False, [
        'F G y & G !(g | b | m)',
        'F G g & G !(y | b | m)',
        'F G b & G !(y | g | m)',
    ]),
    'arm_ind': _fixed('arm_ind', True, [
        '!(ag | ay) U (gm & (!ag U gb))',
        'F gy & (!(ay | ag) U (gb & F gm))',
        '!(ag | ay) U ((!ag U gm) & F gb)',
        '!ag U ((gb | gm) & (!ag U (gy & F gb)))',
        '!(ay | am) U (gb & F (gm & (!ay U gg)))',
    ]),
    'arm_ood': _fixed('arm_ood', True, [
        'F gy & (!(ay | ag) U (gb & F (gm & (!ay U (gg & F gb)))))',
        '(!ag U gb) & (!(ab | ay) U (gm & F (gg & (!ay U (gb & F gm)))))',
        '!ag U ((gb | gm) & (!ag U (gy & F (gb & (!ay U (gm & F gb))))))',
        '!(ay | am) U (gb & (!ay U (gg & F (gm & (!ag U (gy & F gb))))))',
        '!am U ((gy | gg) & (!am U (gb & F (gm & (!ab U (gg & F gy))))))',
    ]),
    'multi_indep': _fixed('multi_indep', True, [
        '(!(m0 | y0) U (b0 & F g0)) & (!(b1 | g1) U (m1 & F y1))',
        'F b0 & (!b0 U (g0 & F y0)) & F g1 & (!g1 U (m1 & F b1))',
        '(!g0 U ((b0 | m0) & (!g0 U y0))) & (!b1 U ((g1 | y1) & (!b1 U m1)))',
    ]),
    'multi_coop': _fixed('multi_coop', True, [
        '!(m0 | m1) U ((b0 & b1) & (!(y0 | y1) U (g0 & g1)))',
        'F ((b0 & b1) & (!(m0 | m1) U ((y0 & y1) & F (g0 & g1))))',
        'F ((b0 & b1) & F ((y0 & y1) & (!(m0 | m1) U (g0 & g1))))',
    ]),
    'multi_mix': _fixed('multi_mix', True, [
        '(!m0 U y0) & (!b1 U m1) & F ((b0 & g1) & F (g0 & m1))',
        '(!y0 U (b0 & F g0)) & (!b1 U g1) & (!(y0 | y1) U (b0 & b1))',
        '(!m0 U (b0 & F (m1 & F (b0 & b1)))) & (!y1 U (g1 & F (y0 & F (b0 & b1))))',
    ]),
    'multi_rsp': _fixed('multi_rsp', False, [
        'G F b0 & G F g1 & G (b0 -> F y1) & G (g1 -> F m0) & G !(y0 | b1)',
        'G F g0 & G F m1 & G (g0 -> F y1) & G (m1 -> F b0) & G !(b1 | m0)',
        'G F m0 & G F y1 & G (m0 -> F g1) & G (y1 -> g0) & G !(m1 | b0)',
    ]),
    'multi_rec': _fixed('multi_rec', False, [
        'G F (b0 & g1) & G F (g0 & y1) & G !(y0 | m1)',
        'G F (g0 & y1) & G F (y0 & b1) & G !(b0 | m1)',
        'G F (m0 & b1) & G F (b0 & y1) & G !(g0 | g1)',
    ]),
    'multi_per': _fixed('multi_per', False, [
        'F G (y0 & m1) & G !(g0 | b0 | y1 | b1)',
        'F G (g0 & b1) & G !(y0 | b0 | m1 | y1)',
        'F G (b0 & y1) & G !(y0 | g0 | m1 | b1)',
    ]),
}
"""The paper's evaluation table, by family (Letter has no persistence set)."""

SAMPLED = ('letter_reach', 'letter_reach_avoid')
"""The sampled Letter families (:func:`sample`)."""


def _disjunction(letters: list[str]) -> str:
    return letters[0] if len(letters) == 1 else '(' + ' | '.join(letters) + ')'


def reach(n_seq: int, n_disj: int, rng: np.random.Generator, letters: tuple[str, ...] = LETTERS) -> str:
    """``F(x1 & F(x2 & ... F xn))``, each ``xi`` a disjunction of ``n_disj + 1`` letters."""
    goals = [_disjunction(list(rng.choice(letters, n_disj + 1, replace=False))) for _ in range(n_seq)]
    text = f'F {goals[-1]}'
    for goal in reversed(goals[:-1]):
        text = f'F ({goal} & {text})'
    return text


def reach_avoid(n_seq: int, n_disj: int, rng: np.random.Generator, letters: tuple[str, ...] = LETTERS) -> str:
    """``!v1 U (x1 & (!v2 U (x2 & ... (!vn U xn))))``: goal and avoid sets
    of ``n_disj + 1`` letters each, distinct within a step."""
    steps = []
    for _ in range(n_seq):
        drawn = list(rng.choice(letters, 2 * (n_disj + 1), replace=False))
        steps.append((_disjunction(drawn[:n_disj + 1]), _disjunction(drawn[n_disj + 1:])))
    goal, avoid = steps[-1]
    text = f'!{avoid} U {goal}'
    for goal, avoid in reversed(steps[:-1]):
        text = f'!{avoid} U ({goal} & ({text}))'
    return text


def sample(family: str, count: int, seed: int, n_seq: int = 4, n_disj: int = 0) -> list[Spec]:
    """``count`` specifications of a sampled family (:data:`SAMPLED`), seeded."""
    if family not in SAMPLED:
        raise ValueError(f'unknown sampled family {family!r}; known: {", ".join(SAMPLED)}')
    if not 1 <= n_seq <= 10 or not 0 <= n_disj <= 5:
        raise ValueError(f'n_seq {n_seq} must be in 1..10 and n_disj {n_disj} in 0..5')
    rng = np.random.default_rng(seed)
    make = reach if family == 'letter_reach' else reach_avoid
    tag = f'{family}_s{n_seq}_d{n_disj}'
    return [Spec(f'{tag}_{k + 1:02d}', make(n_seq, n_disj, rng), True, tag) for k in range(count)]


def paper_set(seed: int = 0, per_cell: int = 3) -> list[Spec]:
    """Every fixed family plus the Letter complexity study: reach and
    reach-avoid for ``n_seq`` in 2..10 and ``n_disj`` in 0..2, ``per_cell``
    specifications each (seeded)."""
    out = [s for specs in FIXED.values() for s in specs]
    for family in SAMPLED:
        for n_seq in range(2, 11):
            for n_disj in range(3):
                out += sample(family, per_cell, seed * 1000 + n_seq * 10 + n_disj, n_seq, n_disj)
    return out


def families() -> Iterator[tuple[str, int, bool]]:
    """(name, number of specifications, finite) of every fixed family."""
    for name, specs in FIXED.items():
        yield name, len(specs), specs[0].finite


def select(names: list[str], seed: int = 0, count: int = 3, n_seq: int = 4, n_disj: int = 0) -> list[Spec]:
    """The specifications of the named families (fixed or sampled; ``paper``:
    :func:`paper_set`)."""
    out: list[Spec] = []
    for name in names:
        if name == 'paper':
            out += paper_set(seed, count)
        elif name in FIXED:
            out += FIXED[name]
        elif name in SAMPLED:
            out += sample(name, count, seed, n_seq, n_disj)
        else:
            raise ValueError(f'unknown family {name!r}; known: paper, {", ".join([*FIXED, *SAMPLED])}')
    return out


def is_finite(formula: str) -> bool:
    """SpecRLBench's reading of a formula given on its own: finite-horizon
    (co-safe: reach, reach-avoid) unless it has an ``always`` (``G``), which
    makes it one of the infinite-horizon families."""
    from ..ltlf.parser import parse
    f = parse(formula)
    stack = [f]
    while stack:
        g = stack.pop()
        if g.op in ('G', 'R'):
            return False
        stack.extend(a for a in g.args if a is not None)
    return True


__all__ = ['FIXED', 'LETTERS', 'SAMPLED', 'Spec', 'families', 'is_finite', 'paper_set', 'reach', 'reach_avoid',
           'sample', 'select']
