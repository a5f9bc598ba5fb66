"""Anytime-valid sequential decisions on a violation rate.

A canary is watched rollout after rollout, and a gate re-checked after
every one must keep its error rates: a fixed-sample rule checked that way
passes a policy that sits exactly at its limit far more often than its
nominal level.  :class:`SequentialTest` decides instead with two
**beta-binomial mixture martingales** (Robbins' method of mixtures): after
``n`` observations with ``k`` violations,

* ``M_below(n, k) = ∫₀^L (q/L)^k ((1−q)/(1−L))^(n−k) dπ(q)`` over a Beta
  prior restricted to rates below the limit ``L``: a nonnegative
  supermartingale whenever the true rate is ``L`` or more, so by Ville's
  inequality it ever reaches ``1/α`` with probability at most ``α``.
  **PASS** (the rate is shown below its limit) when it does;
* ``M_above`` likewise over rates above ``L``: **FAIL** (shown above) when
  it reaches ``1/α``; at most ``α`` when the true rate is ``L`` or less.

Both hold however often the test is looked at, so the gate may be checked
after every observation (or every batch) and stop at the first decision;
no alternative rate is asked of the user (the prior spreads over all of
them).  Both integrals are closed forms: Beta functions and the
regularized incomplete Beta (scipy).

Units: a **rollout** is one observation (violated or not; rollouts are
independent); a **trigger** is one observation with one violation or
none — valid when each trigger's violation probability, given everything
before it, is at most the limit (a rollout's triggers need not be
independent for that, but a policy that fails in bursts breaks it).
Several limits share the error budget by Bonferroni: each of ``m`` tests
gets ``α/m`` for each error, so the family-wise level is ``α``.

Rates are probabilities in [0, 1].
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping

import numpy as np
from scipy import special, stats

from .schema import Report

PASS, FAIL = 'PASS', 'FAIL'
PRIOR_BELOW = (0.5, 1.0)
"""Beta(a, b) of the PASS test's mixture (restricted to rates below the
limit): weighted towards rates near zero, so a clean canary passes early
(limit 5 %, α 5 %: after 74 clean observations; at a true 1 %, a median of
131 and a 90th percentile of 249 — exact, :func:`exact_run`)."""
PRIOR_ABOVE = (1.0, 1.0)
"""Beta(a, b) of the FAIL test's mixture (restricted to rates above the
limit): uniform (limit 5 %, α 5 %: a true 20 % fails after a median of 25)."""


@dataclass(frozen=True)
class SequentialTest:
    """Two anytime-valid tests of a violation rate against ``limit``, each
    erring with probability at most ``alpha`` (module docstring)."""

    limit: float
    alpha: float = 0.05
    prior_below: tuple[float, float] = PRIOR_BELOW
    prior_above: tuple[float, float] = PRIOR_ABOVE

    def __post_init__(self) -> None:
        if not 0.0 < self.limit < 1.0:
            raise ValueError(f'limit {self.limit}: a sequential test needs a rate strictly between 0 and 1')
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f'alpha {self.alpha}: must lie strictly between 0 and 1')

    @property
    def threshold(self) -> float:
        """log(1/α): the evidence a decision needs."""
        return -math.log(self.alpha)

    def log_evidence(self, n: int | np.ndarray, k: int | np.ndarray, above: bool) -> np.ndarray:
        """log M (above: the FAIL test's, else the PASS test's) after ``n`` observations, ``k`` violations."""
        n_, k_ = np.asarray(n, dtype=float), np.asarray(k, dtype=float)
        L = self.limit
        a, b = self.prior_above if above else self.prior_below
        part = stats.beta.logsf if above else stats.beta.logcdf
        mixture = (special.betaln(a + k_, b + n_ - k_) + part(L, a + k_, b + n_ - k_)
                   - special.betaln(a, b) - part(L, a, b))
        out: np.ndarray = mixture - k_ * math.log(L) - (n_ - k_) * math.log1p(-L)
        return out

    def decide(self, n: int, k: int) -> str | None:
        """PASS, FAIL or None (undecided) after ``n`` observations with ``k`` violations."""
        if n <= 0:
            return None
        if float(self.log_evidence(n, k, above=False)) >= self.threshold:
            return PASS
        if float(self.log_evidence(n, k, above=True)) >= self.threshold:
            return FAIL
        return None

    def boundaries(self, max_n: int) -> tuple[np.ndarray, np.ndarray]:
        """For n = 1 … max_n: the most violations that still PASS (−1: none
        does) and the fewest that FAIL (n + 1: none does).  The PASS
        evidence falls as k grows and the FAIL evidence rises, so each
        decision is a threshold on k."""
        return _boundaries(self, max_n)


@lru_cache(maxsize=64)
def _boundaries(test: SequentialTest, max_n: int) -> tuple[np.ndarray, np.ndarray]:
    """Each boundary moves by at most one violation per observation, so each
    n needs the evidence at two counts, not n + 1 of them.  Per unit of
    evidence: an observation without a violation multiplies the PASS
    mixture by E[(1-p)/(1-L)] > 1 (its prior lies below L) and the FAIL
    mixture by a factor < 1; one with a violation multiplies them by
    E[p/L] < 1 and > 1.  So from n to n + 1 the PASS boundary stays or
    rises by one and so does the FAIL boundary.  Where rounding breaks that
    (neither candidate fits), n is scanned whole."""
    pass_k = np.full(max_n, -1, np.int64)
    fail_k = np.arange(1, max_n + 1, dtype=np.int64) + 1
    last_pass, last_fail = -1, 1          # at n = 0: nothing passes; 1 violation is the fewest conceivable
    for n in range(1, max_n + 1):
        last_pass = _edge(test, n, last_pass, above=False)
        last_fail = _edge(test, n, last_fail, above=True)
        pass_k[n - 1], fail_k[n - 1] = last_pass, last_fail
    return pass_k, fail_k


def _edge(test: SequentialTest, n: int, previous: int, above: bool) -> int:
    """At ``n`` observations: the most violations that PASS (−1: none;
    ``above=False``) or the fewest that FAIL (n + 1: none; ``above=True``),
    given the boundary at n − 1 (``previous``)."""
    candidates = np.array([previous, previous + 1])
    inside = (candidates >= 0) & (candidates <= n)
    decided = np.zeros(2, bool)
    if inside.any():
        decided[inside] = test.log_evidence(n, candidates[inside], above) >= test.threshold
    if not above:
        # previous + 1 passing means previous does too; previous failing to pass (when it did at n - 1) is rounding
        if decided[1]:
            return previous + 1
        if decided[0] or previous < 0:
            return previous
    else:
        # previous failing means the boundary stays; else previous + 1 (it fails, or nothing fails yet)
        if decided[0]:
            return previous
        if decided[1] or previous + 1 > n:
            return min(previous + 1, n + 1)
    return _scan(test, n, above)


def _scan(test: SequentialTest, n: int, above: bool) -> int:
    k = np.arange(n + 1)
    hit = np.flatnonzero(test.log_evidence(n, k, above) >= test.threshold)
    if above:
        return int(hit.min()) if len(hit) else n + 1
    return int(hit.max()) if len(hit) else -1


@dataclass
class Replay:
    """What a sequential test said over a sequence of observations."""

    decision: str | None            # PASS, FAIL or None (undecided at the end)
    after: int | None               # observations when it decided (None: undecided)
    batches: int | None             # batches (rollouts) when it decided
    observations: int               # all there were
    violations: int
    log_pass: float                 # the evidence at the decision (or at the end)
    log_fail: float


def replay(test: SequentialTest, batches: list[tuple[int, int]]) -> Replay:
    """Feed ``(observations, violations)`` batches in order (a rollout's
    triggers, or one rollout as one observation), checking after each; the
    first decision stands."""
    n = k = 0
    for i, (obs, viol) in enumerate(batches, start=1):
        if obs < 0 or viol < 0 or viol > obs:
            raise ValueError(f'batch {i}: {viol} violations of {obs} observations')
        n, k = n + obs, k + viol
        decision = test.decide(n, k)
        if decision is not None:
            return Replay(decision, n, i, sum(b for b, _ in batches), sum(v for _, v in batches),
                          float(test.log_evidence(n, k, above=False)), float(test.log_evidence(n, k, above=True)))
    return Replay(None, None, None, n, k, float(test.log_evidence(n, k, above=False)) if n else 0.0,
                  float(test.log_evidence(n, k, above=True)) if n else 0.0)


def observed(triggers: int, violations: int, unit: str) -> tuple[int, int]:
    """One rollout's (observations, violations) in ``unit``: ``(1,
    violated)`` for the rollout unit, ``(triggers, violations)`` (at most one
    violation per trigger) for the trigger unit — the same rule for a
    report replayed and for a live gate."""
    if unit == 'rollout':
        return 1, int(violations > 0)
    return int(triggers), min(int(violations), int(triggers))


def entry_batches(entry: Mapping[str, Any], unit: str) -> list[tuple[int, int]]:
    """A report entry's (property's or category's) rollouts as replay
    batches (:func:`observed`), in report order."""
    v, n = entry['clusters']['violations'], entry['clusters']['triggers']
    return [observed(ni, vi, unit) for vi, ni in zip(v, n)]


@dataclass
class RunningBounds:
    """The anytime-valid confidence sequence of a rate, after each batch:
    ``upper`` is the smallest limit whose PASS test would have passed by then
    (1.0: none yet), ``lower`` the largest whose FAIL test would have failed
    (0.0: none), both on ``grid`` and carried forward (a bound once shown
    stays shown).  A limit's test decides PASS when ``upper`` falls to it and
    FAIL when ``lower`` rises above it (to the grid's resolution)."""

    observations: np.ndarray        # cumulative, per batch
    violations: np.ndarray
    upper: np.ndarray
    lower: np.ndarray


def running_bounds(batches: list[tuple[int, int]], alpha: float, grid: np.ndarray | None = None,
                   prior_below: tuple[float, float] = PRIOR_BELOW,
                   prior_above: tuple[float, float] = PRIOR_ABOVE) -> RunningBounds:
    """:class:`RunningBounds` of ``(observations, violations)`` batches at
    level ``alpha`` (one test's share, as in :func:`family`); ``grid``: the
    candidate limits (default 400 log-spaced rates from 1e-4 to 0.9999)."""
    limits = np.geomspace(1e-4, 0.9999, 400) if grid is None else np.asarray(grid, float)
    n = np.cumsum([b for b, _ in batches], dtype=np.int64)
    k = np.cumsum([v for _, v in batches], dtype=np.int64)
    upper, lower = np.ones(len(n)), np.zeros(len(n))
    seen = n > 0
    for L in limits:
        test = SequentialTest(float(L), alpha, prior_below, prior_above)
        below = np.zeros(len(n), bool)
        above = np.zeros(len(n), bool)
        below[seen] = test.log_evidence(n[seen], k[seen], above=False) >= test.threshold
        above[seen] = test.log_evidence(n[seen], k[seen], above=True) >= test.threshold
        upper = np.where(below, np.minimum(upper, L), upper)
        lower = np.where(above, np.maximum(lower, L), lower)
    return RunningBounds(n, k, np.minimum.accumulate(upper), np.maximum.accumulate(lower))


@dataclass
class LimitReplay:
    """One limit's sequential test replayed over a report (:func:`sequential_decisions`)."""

    name: str
    kind: str                       # 'property' or 'category'
    test: SequentialTest
    batches: list[tuple[int, int]]  # per rollout, in report order
    result: Replay
    unit: str = 'trigger'           # what one observation is

    def as_dict(self) -> dict[str, Any]:
        r = self.result
        return {'name': self.name, 'kind': self.kind, 'limit': self.test.limit, 'test_alpha': self.test.alpha,
                'decision': r.decision, 'after_observations': r.after, 'after_rollouts': r.batches,
                'observations': r.observations, 'violations': r.violations, 'rollouts': len(self.batches),
                'log_evidence_below': r.log_pass, 'log_evidence_above': r.log_fail,
                'summary': plain_decision(self.name, '', r.observations, r.violations, len(self.batches), self.test,
                                          self.unit, r.decision, r.after)}


def sequential_decisions(report: Report, limits: dict[str, float], alpha: float = 0.05,
                         unit: str = 'trigger') -> list[LimitReplay]:
    """Every limit's test (:func:`family`: α shared) replayed over the
    report's rollouts in report order — what ``gate --sequential`` prints and
    report.html's sequential section draws.  An unknown name is a
    SafemanipError listing the known ones."""
    from .gate import report_entry
    if unit not in ('rollout', 'trigger'):
        raise ValueError(f'unit {unit!r}: rollout or trigger')
    out = []
    for name, test in family(limits, alpha).items():
        kind, entry = report_entry(report, name)
        batches = entry_batches(entry, unit)
        out.append(LimitReplay(name, kind, test, batches, replay(test, batches), unit))
    return out


@dataclass
class ExactRun:
    """The exact behaviour of a test checked after every observation of a
    Bernoulli(``rate``) stream, up to ``max_n`` observations."""

    pass_by: np.ndarray        # P(PASS at or before n), n = 1 … max_n
    fail_by: np.ndarray

    def quantile(self, decision: str, q: float) -> int | None:
        """The number of observations by which ``decision`` is reached with probability ``q`` (None: not by max_n)."""
        cdf = self.pass_by if decision == PASS else self.fail_by
        hit = np.flatnonzero(cdf >= q)
        return int(hit[0]) + 1 if len(hit) else None


def exact_run(test: SequentialTest, rate: float, max_n: int) -> ExactRun:
    """:func:`exact_stopping` at the test's PASS and FAIL boundaries."""
    pass_k, fail_k = test.boundaries(max_n)
    return exact_stopping(pass_k, fail_k, rate, max_n)


def exact_stopping(pass_k: np.ndarray, fail_k: np.ndarray | None, rate: float, max_n: int) -> ExactRun:
    """Any rule that decides on counts, checked after every observation of a
    Bernoulli(``rate``) stream up to ``max_n`` (``pass_k[n-1]``: the most
    violations that PASS at n, −1 none; ``fail_k[n-1]``: the fewest that FAIL,
    n + 1 none; None: never fails), by dynamic programming over the violation
    count (no simulation): the mass of every undecided (n, k), moved one
    observation at a time and absorbed at the boundaries."""
    mass = np.zeros(max_n + 2)
    mass[0] = 1.0
    pass_by, fail_by = np.zeros(max_n), np.zeros(max_n)
    passed = failed = 0.0
    for n in range(1, max_n + 1):
        moved = mass * (1.0 - rate)
        moved[1:] += mass[:-1] * rate
        mass = moved
        hi = int(pass_k[n - 1])
        if hi >= 0:
            passed += float(mass[:hi + 1].sum())
            mass[:hi + 1] = 0.0
        lo = n + 1 if fail_k is None else int(fail_k[n - 1])
        if lo <= n:
            failed += float(mass[lo:].sum())
            mass[lo:] = 0.0
        pass_by[n - 1], fail_by[n - 1] = passed, failed
    return ExactRun(pass_by, fail_by)


def family(limits: dict[str, float], alpha: float = 0.05, prior_below: tuple[float, float] = PRIOR_BELOW,
           prior_above: tuple[float, float] = PRIOR_ABOVE) -> dict[str, SequentialTest]:
    """One test per limit sharing ``alpha`` by Bonferroni (each error of each test at ``alpha / len(limits)``)."""
    each = alpha / max(1, len(limits))
    return {name: SequentialTest(limit, each, prior_below, prior_above) for name, limit in limits.items()}


@dataclass
class _Stream:
    """One limit's evidence from one robot (or pooled): observations, violations, rollouts, and the decision."""

    observations: int = 0
    violations: int = 0
    rollouts: int = 0
    decision: str | None = None
    decided_after: int | None = None


POOLED = ''
"""The robot key of the decision pooled over every robot."""


class CanaryGate:
    """The live gate's state, pure (no ROS): rollouts arrive one at a time
    from one or several robots, each as its property instances' trigger and
    violation counts; every limit's test (shared budget: :func:`family`) is
    checked after each rollout, per robot and pooled over the fleet, and a
    first decision stands.  :meth:`to_json` / :meth:`from_json` carry it
    across a restart."""

    def __init__(self, limits: dict[str, float], unit: str = 'trigger', alpha: float = 0.05) -> None:
        if unit not in ('rollout', 'trigger'):
            raise ValueError(f'unit {unit!r}: rollout or trigger')
        self.limits, self.unit, self.alpha = dict(limits), unit, alpha
        self.tests = family(self.limits, alpha)
        self.streams: dict[tuple[str, str], _Stream] = {}
        self.seen: set[tuple[str, str]] = set()        # (robot, rollout id) already counted

    def add_rollout(self, robot: str, rollout: str,
                    instances: list[tuple[str, str, int, int]]) -> bool:
        """One finished rollout of ``robot``: (property, category, triggers,
        violations) per instance.  A limit names a property or a category;
        its counts are summed over the instances that match.  Returns False
        (and counts nothing) for a rollout already counted."""
        if (robot, rollout) in self.seen:
            return False
        self.seen.add((robot, rollout))
        for name, test in self.tests.items():
            rows = [(t, v) for prop, cat, t, v in instances if name in (prop, cat)]
            if not rows:
                continue          # this rollout never ran the limited property
            trig, viol = sum(t for t, _ in rows), sum(min(v, t) for t, v in rows)
            obs, bad = observed(trig, viol, self.unit)
            # A gate of one robot on the monitor's own topics has robot '' (= POOLED): counted once.
            for key in dict.fromkeys(((robot, name), (POOLED, name))):
                s = self.streams.setdefault(key, _Stream())
                s.observations, s.violations, s.rollouts = s.observations + obs, s.violations + bad, s.rollouts + 1
                if s.decision is None:
                    s.decision = test.decide(s.observations, s.violations)
                    if s.decision is not None:
                        s.decided_after = s.observations
        return True

    def robots(self) -> list[str]:
        return sorted({r for r, _ in self.streams if r != POOLED})

    def stream(self, robot: str, name: str) -> _Stream:
        return self.streams.get((robot, name), _Stream())

    def outcome(self) -> str | None:
        """FAIL when some limit failed (for some robot or pooled), PASS when
        every limit passed pooled, else None (undecided)."""
        if any(s.decision == FAIL for s in self.streams.values()):
            return FAIL
        if all(self.stream(POOLED, name).decision == PASS for name in self.limits):
            return PASS
        return None

    def failures(self) -> list[tuple[str, str]]:
        """(robot or POOLED, limit) of every FAIL."""
        return sorted(k for k, s in self.streams.items() if s.decision == FAIL)

    def to_json(self) -> dict[str, Any]:
        return {'limits': self.limits, 'unit': self.unit, 'alpha': self.alpha,
                'seen': sorted([r, e] for r, e in self.seen),
                'streams': [{'robot': r, 'name': n, **s.__dict__} for (r, n), s in sorted(self.streams.items())]}

    @classmethod
    def from_json(cls, doc: Any) -> "CanaryGate":
        """The gate a :meth:`to_json` document holds, trusted only once every
        value is checked: types and ranges, streams only for its limits,
        violations within observations, each robot's counts adding up to the
        pooled ones, and each decision one its test reaches at the count it
        names (a PASS with no observation, or a FAIL no count supports, is
        refused).

        Raises:
            ValueError: naming the field and what is wrong with it.
        """
        if not isinstance(doc, dict):
            raise ValueError(f'expected a JSON object, got {type(doc).__name__}')
        limits, unit, alpha = doc.get('limits'), doc.get('unit'), doc.get('alpha')
        if not isinstance(limits, dict) or not limits or not all(
                isinstance(n, str) and _rate(x) for n, x in limits.items()):
            raise ValueError('limits: expected {NAME: rate strictly between 0 and 1}')
        if not _rate(alpha):
            raise ValueError('alpha: expected a number strictly between 0 and 1')
        if unit not in ('rollout', 'trigger'):
            raise ValueError(f'unit: expected rollout or trigger, got {unit!r:.40}')
        gate = cls(limits, str(unit), float(alpha or 0))
        seen = doc.get('seen')
        if not isinstance(seen, list) or not all(isinstance(x, list) and len(x) == 2 and all(
                isinstance(y, str) for y in x) for x in seen):
            raise ValueError('seen: expected a list of [robot, rollout id]')
        gate.seen = {(r, e) for r, e in seen}
        rows = doc.get('streams')
        if not isinstance(rows, list):
            raise ValueError('streams: expected a list')
        for i, row in enumerate(rows):
            gate._restore_stream(i, row)
        gate._check_consistent()
        return gate

    def _restore_stream(self, i: int, row: Any) -> None:
        where = f'streams[{i}]'
        fields = {'robot', 'name', 'observations', 'violations', 'rollouts', 'decision', 'decided_after'}
        if not isinstance(row, dict) or set(row) != fields:
            raise ValueError(f'{where}: expected the fields {", ".join(sorted(fields))}')
        robot, name = row['robot'], row['name']
        if not isinstance(robot, str) or name not in self.limits:
            raise ValueError(f'{where}: a stream for {name!r}, which is no limit of this gate '
                             f'({", ".join(self.limits)})')
        for key in ('observations', 'violations', 'rollouts'):
            if not _count(row[key]):
                raise ValueError(f'{where}.{key}: expected a count in [0, {MAX_COUNT}], got {row[key]!r:.40}')
        n, k, decision, after = row['observations'], row['violations'], row['decision'], row['decided_after']
        if k > n:
            raise ValueError(f'{where}: {k} violations in {n} observations')
        if decision not in (None, PASS, FAIL):
            raise ValueError(f'{where}.decision: expected null, {PASS!r} or {FAIL!r}, got {decision!r:.40}')
        if (decision is None) != (after is None) or (after is not None and not (_count(after) and 0 < after <= n)):
            raise ValueError(f'{where}.decided_after: {after!r:.40} does not go with decision {decision!r} '
                             f'after {n} observations')
        if decision is not None:
            # The violations at the decision lay between k - (n - after) and min(k, after); a PASS needs the
            # test to pass at the fewest of them, a FAIL to fail at the most.
            test = self.tests[name]
            at = max(0, k - (n - after)) if decision == PASS else min(k, after)
            if test.decide(after, at) != decision:
                raise ValueError(f'{where}: {decision} after {after} observations is not what its test decides '
                                 f'with {n} observations and {k} violations in all')
        if (robot, name) in self.streams:
            raise ValueError(f'{where}: a second stream for robot {robot!r}, limit {name!r}')
        self.streams[(robot, name)] = _Stream(n, k, row['rollouts'], decision, after)

    def _check_consistent(self) -> None:
        for name in self.limits:
            robots = [s for (r, n), s in self.streams.items() if n == name and r != POOLED]
            pooled = self.streams.get((POOLED, name))
            if robots and pooled is None:
                raise ValueError(f'streams: no pooled stream for {name!r} beside its robots\' streams')
            if robots and pooled is not None:
                for key in ('observations', 'violations', 'rollouts'):
                    total = sum(getattr(s, key) for s in robots)
                    if total != getattr(pooled, key):
                        raise ValueError(f'streams: the robots\' {key} for {name!r} add up to {total}, '
                                         f'the pooled stream says {getattr(pooled, key)}')
            if pooled is not None and pooled.rollouts > len(self.seen):
                raise ValueError(f'streams: {pooled.rollouts} rollouts counted for {name!r} but {len(self.seen)} '
                                 'seen')


def upper_bound(test: SequentialTest, n: int, k: int) -> float:
    """The smallest limit whose PASS test (same α and priors) passes after
    ``n`` observations with ``k`` violations: the anytime-valid upper bound of
    the rate (1.0 when none does), to 1e-4."""
    if n <= 0:
        return 1.0
    lo, hi = k / n, 0.9999
    if SequentialTest(hi, test.alpha, test.prior_below, test.prior_above).decide(n, k) != PASS:
        return 1.0
    while hi - lo > 1e-4:
        mid = (lo + hi) / 2
        if mid > 0 and SequentialTest(mid, test.alpha, test.prior_below, test.prior_above).decide(n, k) == PASS:
            hi = mid
        else:
            lo = mid
    return hi


def clean_to_pass(test: SequentialTest, n: int, k: int, most: int = 10**7) -> int | None:
    """How many more clean observations (no violation) would make the PASS
    test pass from ``n`` observations with ``k`` violations (0: it passes
    now; None: none up to ``most`` would)."""
    def passes(m: int) -> bool:
        return float(test.log_evidence(n + m, k, above=False)) >= test.threshold
    if n > 0 and passes(0):
        return 0
    hi = 1
    while not passes(hi):
        hi *= 2
        if hi > most:
            return None
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if passes(mid) else (mid, hi)
    return hi


def plain_decision(name: str, robot: str, observations: int, violations: int, rollouts: int,
                   test: SequentialTest, unit: str, decision: str | None = None,
                   decided_after: int | None = None) -> str:
    """One limit's standing in a release manager's words: the decision, the
    counts, the rate's bound against the limit and, while undecided, how many
    more clean observations would pass at once, e.g. ``UNDECIDED: p (fleet):
    0 of 6 rollouts violated, bound 0.46 > limit 0.2 (alpha 0.05); about 9
    more clean rollouts would pass``.  ``decision`` and ``decided_after``:
    a decision reached earlier (a first decision stands), else the test's
    at these counts."""
    who = f'{name} ({robot or "fleet"})'
    things = f'{unit}s' if unit == 'rollout' else 'triggers'
    counts = f'{violations} of {observations} {things} violated in {rollouts} rollout{"s" * (rollouts != 1)}' \
        if unit != 'rollout' else f'{violations} of {observations} rollouts violated'
    decision = decision or test.decide(observations, violations)
    ub = upper_bound(test, observations, violations)
    level = f'(alpha {test.alpha:g})'
    when = f', decided after {decided_after} {things}' if decided_after else ''
    if decision == PASS:
        bound = f'bound {ub:.3g} <= limit {test.limit:g}' if ub <= test.limit else f'shown below {test.limit:g}'
        return f'PASS: {who}: {counts}; {bound}{when} {level}'
    if decision == FAIL:
        return f'FAIL: {who}: {counts}; the rate is shown above the limit {test.limit:g}{when} {level}'
    more = clean_to_pass(test, observations, violations)
    if more is None:
        tail = 'no run of clean observations would pass it now'
    elif unit == 'rollout' or not rollouts or not observations:
        tail = f'about {more} more clean {things} would pass'
    else:
        per = observations / rollouts
        tail = f'about {more} more clean triggers (~{math.ceil(more / per)} rollouts at {per:.3g} a rollout) ' \
               'would pass'
    return f'UNDECIDED: {who}: {counts}, bound {ub:.3g} > limit {test.limit:g} {level}; {tail}'


MAX_COUNT = 2**53
"""The largest count a state file may hold (exact in a JSON number and in every message field)."""


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT


def _rate(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1


def rollout_rows(metrics: Any) -> list[tuple[str, str, int, int]]:
    """A final ``MonitorMetrics`` (an rclpy message, or rosbags' from a bag)
    as :meth:`CanaryGate.add_rollout` takes it: (property, category,
    triggers, violations) per instance."""
    return [(str(m.property), str(m.category), int(m.triggers), int(m.violations)) for m in metrics.properties]


def rollouts_from_bags(paths: list[str]) -> list[tuple[float, str, str, list[tuple[str, str, int, int]]]]:
    """The finished rollouts recorded in bags (``MonitorMetrics`` with
    ``final`` on a topic ending in ``metrics``; the robot is the topic's
    namespace): (stamp s, robot, rollout id, (property, category, triggers,
    violations) per instance), in stamp order — what a live gate would
    have counted."""
    from ..bag import open_bag, typestore
    from ..bag.errors import BagReadError
    from ..stamps import stamp_s
    ts = typestore()
    out = []
    for path in paths:
        with open_bag(path) as bag:
            conns = [c for c in bag.connections if c.msgtype == 'safemanip_ros/msg/MonitorMetrics'
                     and c.topic.rstrip('/').endswith('metrics')]
            for k, (conn, _, raw) in enumerate(bag.messages(conns)):
                try:
                    msg = ts.deserialize_cdr(raw, conn.msgtype)
                    final, rollout = bool(msg.final), str(msg.episode_id)
                    rows = rollout_rows(msg)
                except Exception as exc:     # rosbags raises several types for bytes that are not the message
                    raise BagReadError(f'{path}: {conn.topic} message {k + 1}: not a readable MonitorMetrics '
                                       f'({type(exc).__name__}: {exc})'[:300]) from None
                if not final:
                    continue
                bad = [r for r in rows if r[3] > r[2] or min(r[2], r[3]) < 0]
                if bad:
                    raise BagReadError(f'{path}: {conn.topic} message {k + 1} (rollout {rollout!r:.60}): '
                                       f'{bad[0][0]!r:.60} has {bad[0][3]} violations in {bad[0][2]} triggers')
                robot = conn.topic.rstrip('/')[:-len('metrics')].strip('/')
                out.append((stamp_s(msg.header.stamp), robot, rollout, rows))
    return sorted(out, key=lambda r: r[0])
