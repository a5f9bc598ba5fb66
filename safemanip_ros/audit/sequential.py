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

    def as_dict(self) -> dict[str, Any]:
        r = self.result
        return {'name': self.name, 'kind': self.kind, 'limit': self.test.limit, 'test_alpha': self.test.alpha,
                'decision': r.decision, 'after_observations': r.after, 'after_rollouts': r.batches,
                'observations': r.observations, 'violations': r.violations, 'rollouts': len(self.batches),
                'log_evidence_below': r.log_pass, 'log_evidence_above': r.log_fail}


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
        out.append(LimitReplay(name, kind, test, batches, replay(test, batches)))
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
        self.seen: set[tuple[str, str]] = set()        # (robot, episode id) already counted

    def add_rollout(self, robot: str, episode: str,
                    instances: list[tuple[str, str, int, int]]) -> bool:
        """One finished rollout of ``robot``: (property, category, triggers,
        violations) per instance.  A limit names a property or a category;
        its counts are summed over the instances that match.  Returns False
        (and counts nothing) for an episode already counted."""
        if (robot, episode) in self.seen:
            return False
        self.seen.add((robot, episode))
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
    def from_json(cls, doc: dict[str, Any]) -> "CanaryGate":
        gate = cls(doc['limits'], doc['unit'], doc['alpha'])
        gate.seen = {(r, e) for r, e in doc['seen']}
        for row in doc['streams']:
            row = dict(row)
            key = (row.pop('robot'), row.pop('name'))
            gate.streams[key] = _Stream(**row)
        return gate


def rollouts_from_bags(paths: list[str]) -> list[tuple[float, str, str, list[tuple[str, str, int, int]]]]:
    """The finished rollouts recorded in bags (``MonitorMetrics`` with
    ``final`` on a topic ending in ``metrics``; the robot is the topic's
    namespace): (stamp s, robot, episode id, (property, category, triggers,
    violations) per instance), in stamp order — what a live gate would
    have counted."""
    from ..bag import open_bag, typestore
    from ..stamps import stamp_s
    ts = typestore()
    out = []
    for path in paths:
        with open_bag(path) as bag:
            conns = [c for c in bag.connections if c.msgtype == 'safemanip_ros/msg/MonitorMetrics'
                     and c.topic.rstrip('/').endswith('metrics')]
            for conn, _, raw in bag.messages(conns):
                msg = ts.deserialize_cdr(raw, conn.msgtype)
                if not msg.final:
                    continue
                robot = conn.topic.rstrip('/')[:-len('metrics')].strip('/')
                out.append((stamp_s(msg.header.stamp), robot, msg.episode_id,
                            [(m.property, m.category, int(m.triggers), int(m.violations)) for m in msg.properties]))
    return sorted(out, key=lambda r: r[0])
