"""SpecRLBench's metrics, computed from our minimal DFAs.

Per trajectory (a list of steps, each the set of propositions true after
that environment step; the reset state is not a step, as in SpecRLBench's
loop), with the four-valued verdict of the specification after each step
(SEMANTICS.md §2, ``safemanip check``):

* **success** — the verdict becomes ``true``: every continuation satisfies
  the specification (a good prefix; for the co-safe reach and reach-avoid
  specifications this is exactly the step SpecRLBench's automaton reaches an
  accepting state and ends the rollout).  Only finite-horizon specifications
  succeed.
* **violation** — the verdict becomes ``false``: no continuation can
  satisfy it (a dead end; SpecRLBench: a non-accepting bottom strongly
  connected component).  For the families here a finite prefix is a dead end
  of the LTLf automaton exactly when it is a bad prefix of the infinite-trace
  formula (their liveness parts can always still be met).
* **others** — neither within the trajectory (the time limit).
* **steps to success** — the 1-based step of the success.
* **accepting visits** (infinite-horizon) — completed rounds of the
  formula's conjuncts.  The formula is split at its top-level ``&`` into
  conjuncts (``G F a``, ``G(a -> F b)``, ``G !c``, ``F G y`` ...), each
  compiled to its own minimal DFA; a conjunct is *met* at a step after which
  its DFA accepts (as an LTLf formula: ``G F a`` on a step on ``a``,
  ``G(a -> F b)`` on a step with no open request, ``F G y`` on a step on
  ``y``, ``G !c`` on every step before a ``c``).  A visit is a step by which
  every conjunct has been met since the previous visit (the round-robin
  counter that turns a generalised Büchi condition into a Büchi one),
  counted until a violation.  The whole formula's LTLf acceptance would not
  do: ``G F a & G F b`` accepts only a last step on both ``a`` and ``b``,
  which one letter at a time never gives.  SpecRLBench counts accepting
  transitions of a limit-deterministic Büchi automaton built by Owl/Rabinizer
  instead; the counts agree where that automaton degeneralises the same way
  (``G F a & G F b``: once per round through ``a`` and ``b``) and differ
  where its construction does otherwise (an LDBA for ``F G y`` accepts only
  after its nondeterministic jump; ours counts every step on ``y``; a
  response conjunct is met on every quiet step here).

Aggregated per specification and seed: ηs, ηv, ηo = 1 − ηs − ηv, µ over
successful trajectories, µacc over non-violating ones; across seeds the mean
and the population standard deviation (n; the paper does not say which).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..ltlf.runtime import StepTable
from ..ltlf.verdict import Verdict

SUCCESS, VIOLATION, OTHER = 'success', 'violation', 'other'


@dataclass(frozen=True)
class Outcome:
    """One trajectory under one specification."""

    outcome: str                 # success, violation or other
    step: int | None             # 1-based step of the success or violation
    accepting_visits: int        # steps whose prefix satisfies the formula (before a violation)
    steps: int                   # the trajectory's length


def conjuncts(formula: str) -> list[str]:
    """The formula's top-level conjuncts (itself when it is no conjunction)."""
    from ..ltlf import parse
    stack, out = [parse(formula)], []
    while stack:
        f = stack.pop()
        if f.op == '&':
            stack.extend(reversed(f.args))
        else:
            out.append(str(f))
    return out


def advance_rounds(met: np.ndarray, reached: np.ndarray, counting: np.ndarray | None = None) -> np.ndarray:
    """One step of the accepting-visit rounds (module docstring), in place:
    ``met`` (``bool[n, k]``, the conjuncts met since the last visit) gains
    ``reached`` (the conjuncts whose DFA accepts after this step); a row with
    every conjunct met completes a round — where ``counting`` (default every
    row) allows — and starts the next.  Returns the rows that completed one.
    The evaluator counts the rounds; the greedy policy steers by what is left."""
    met |= reached
    done = np.asarray(met.all(axis=1), bool)
    if counting is not None:
        done = np.logical_and(done, counting)
    met[done] = False
    return done


def outcomes(table: StepTable, letters: Sequence[np.ndarray], finite: bool,
             parts: Sequence[tuple[StepTable, Sequence[np.ndarray]]] = ()) -> list[Outcome]:
    """Each trajectory's :class:`Outcome` (``letters``: per trajectory, its
    bit-packed steps for ``table``'s DFA), all stepped together.  ``parts``:
    per conjunct (:func:`conjuncts`), its table and letters, for the
    accepting visits of an infinite-horizon formula (without them a visit is
    a step the whole formula's DFA accepts)."""
    n = len(letters)
    if n == 0:
        return []
    lengths = np.array([len(x) for x in letters], np.int64)
    T = int(lengths.max()) if n else 0
    grid = np.zeros((n, T), np.int64)
    for k, x in enumerate(letters):
        grid[k, :len(x)] = x
    state = np.full(n, table.dfa.initial, np.int32)
    first_true = np.full(n, -1, np.int64)
    first_false = np.full(n, -1, np.int64)
    visits = np.zeros(n, np.int64)
    labels, accepting = table.labels, table.accepting
    part_grids = []
    for ptable, pletters in parts:
        g = np.zeros((n, T), np.int64)
        for k, x in enumerate(pletters):
            g[k, :len(x)] = x
        part_grids.append((ptable, g, np.full(n, ptable.dfa.initial, np.int32)))
    met = np.zeros((n, len(parts)), bool)
    for t in range(T):
        live = lengths > t
        state = np.where(live, table.step_many(state, grid[:, t]), state)
        lab = labels[state]
        undecided = (first_false < 0) & live
        if part_grids:
            reached = np.zeros_like(met)
            for j, (ptable, g, pstate) in enumerate(part_grids):
                pstate[:] = np.where(live, ptable.step_many(pstate, g[:, t]), pstate)
                reached[:, j] = ptable.accepting[pstate]
            visits += advance_rounds(met, reached, undecided & (lab != Verdict.FALSE))
        else:
            visits += undecided & accepting[state]
        first_true = np.where((first_true < 0) & undecided & (lab == Verdict.TRUE), t, first_true)
        first_false = np.where(undecided & (lab == Verdict.FALSE), t, first_false)
    out = []
    for k in range(n):
        ft, ff = int(first_true[k]), int(first_false[k])
        if finite and ft >= 0 and (ff < 0 or ft < ff):
            out.append(Outcome(SUCCESS, ft + 1, int(visits[k]), int(lengths[k])))
        elif ff >= 0:
            out.append(Outcome(VIOLATION, ff + 1, int(visits[k]), int(lengths[k])))
        else:
            out.append(Outcome(OTHER, None, int(visits[k]), int(lengths[k])))
    return out


@dataclass(frozen=True)
class SpecTables:
    """What scoring one specification needs: its DFA's table and, for an
    infinite-horizon one, its conjuncts' (the accepting-visit rounds)."""

    table: StepTable
    parts: tuple[StepTable, ...]
    finite: bool

    @classmethod
    def of(cls, formula: str, finite: bool) -> 'SpecTables':
        from ..ltlf.cache import compile_cached
        parts = () if finite else tuple(StepTable.from_dfa(compile_cached(c)) for c in conjuncts(formula))
        return cls(StepTable.from_dfa(compile_cached(formula)), parts, finite)

    def score(self, letters_of: Callable[[StepTable], Sequence[np.ndarray]]) -> list[Outcome]:
        """:func:`outcomes` of the trajectories whose bit-packed letters
        ``letters_of(table)`` gives for each table."""
        return outcomes(self.table, letters_of(self.table), self.finite,
                        [(p, letters_of(p)) for p in self.parts])


@dataclass
class SeedRow:
    """One specification over one seed's trajectories."""

    spec: str
    seed: str
    finite: bool
    trajectories: int
    success_rate: float
    violation_rate: float
    others_rate: float
    mean_steps_to_success: float | None
    mean_accepting_visits: float | None

    @classmethod
    def of(cls, spec: str, seed: str, finite: bool, results: list[Outcome]) -> 'SeedRow':
        n = len(results)
        succ = [r for r in results if r.outcome == SUCCESS]
        viol = sum(r.outcome == VIOLATION for r in results)
        ok = [r.accepting_visits for r in results if r.outcome != VIOLATION]
        s, v = (len(succ) / n, viol / n) if n else (0.0, 0.0)
        return cls(spec, seed, finite, n, s, v, (1.0 - s - v) if n else 0.0,
                   float(np.mean([r.step for r in succ])) if succ else None,
                   None if finite or not ok else float(np.mean(ok)))

    def as_dict(self) -> dict[str, object]:
        return {'spec': self.spec, 'seed': self.seed, 'finite': self.finite, 'trajectories': self.trajectories,
                'success_rate': self.success_rate, 'violation_rate': self.violation_rate,
                'others_rate': self.others_rate, 'mean_steps_to_success': self.mean_steps_to_success,
                **({} if self.finite else {'mean_accepting_visits': self.mean_accepting_visits})}


def _mean_std(values: list[float | None]) -> tuple[float | None, float | None]:
    vals = [v for v in values if v is not None]
    if not vals:
        return None, None
    return float(np.mean(vals)), float(np.std(vals))


@dataclass
class SpecRow:
    """One specification across seeds: mean and standard deviation (n) of
    each seed's rates and means."""

    spec: str
    formula: str
    finite: bool
    seeds: list[SeedRow] = field(default_factory=list)

    def stat(self, key: str) -> tuple[float | None, float | None]:
        return _mean_std([getattr(s, key) for s in self.seeds])

    def as_dict(self) -> dict[str, object]:
        keys = ['success_rate', 'violation_rate', 'others_rate', 'mean_steps_to_success'] + \
            ([] if self.finite else ['mean_accepting_visits'])
        out: dict[str, object] = {'spec': self.spec, 'formula': self.formula, 'finite': self.finite,
                     'trajectories': sum(s.trajectories for s in self.seeds), 'seeds': len(self.seeds)}
        for key in keys:
            mean, std = self.stat(key)
            out[key], out[f'{key}_std'] = mean, std
        return out


def format_table(rows: list[SpecRow], per_seed: bool = False) -> str:
    """SpecRLBench's columns: finite specifications ηs ↑, ηv ↓, ηo, µ ↓;
    infinite ones ηv ↓ and µacc ↑ (mean ± std over seeds)."""
    def pm(row: SpecRow, key: str, digits: int = 2) -> str:
        mean, std = row.stat(key)
        return '-' if mean is None else f'{mean:.{digits}f}±{std:.{digits}f}'

    def one(v: float | None, digits: int = 2) -> str:
        return '-' if v is None else f'{v:.{digits}f}'
    lines = []
    finite = [r for r in rows if r.finite]
    infinite = [r for r in rows if not r.finite]
    w = max([10] + [len(r.spec) for r in rows])
    if finite:
        lines.append(f'{"finite":{w}s} {"seeds":>5s} {"n":>5s} {"ηs ↑":>11s} {"ηv ↓":>11s} {"ηo":>11s} {"µ ↓":>13s}')
        for r in finite:
            lines.append(f'{r.spec:{w}s} {len(r.seeds):>5d} {sum(s.trajectories for s in r.seeds):>5d} '
                         f'{pm(r, "success_rate"):>11s} {pm(r, "violation_rate"):>11s} {pm(r, "others_rate"):>11s} '
                         f'{pm(r, "mean_steps_to_success", 1):>13s}')
            if per_seed:
                for s in r.seeds:
                    lines.append(f'{"  seed " + s.seed:{w}s} {"":>5s} {s.trajectories:>5d} {one(s.success_rate):>11s} '
                                 f'{one(s.violation_rate):>11s} {one(s.others_rate):>11s} '
                                 f'{one(s.mean_steps_to_success, 1):>13s}')
    if infinite:
        lines.append(f'{"infinite":{w}s} {"seeds":>5s} {"n":>5s} {"ηv ↓":>11s} {"µacc ↑":>13s}')
        for r in infinite:
            lines.append(f'{r.spec:{w}s} {len(r.seeds):>5d} {sum(s.trajectories for s in r.seeds):>5d} '
                         f'{pm(r, "violation_rate"):>11s} {pm(r, "mean_accepting_visits", 1):>13s}')
            if per_seed:
                for s in r.seeds:
                    lines.append(f'{"  seed " + s.seed:{w}s} {"":>5s} {s.trajectories:>5d} '
                                 f'{one(s.violation_rate):>11s} {one(s.mean_accepting_visits, 1):>13s}')
    return '\n'.join(lines)


__all__ = ['OTHER', 'Outcome', 'SUCCESS', 'SeedRow', 'SpecRow', 'SpecTables', 'VIOLATION', 'conjuncts',
           'format_table', 'outcomes']
