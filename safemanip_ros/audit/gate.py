"""Deployment gate over an audit report.

A limit ``NAME=X`` (a category or a property) passes when the upper bound of
the per-trigger violation rate's interval (cluster bootstrap over rollouts,
at the requested confidence) is below X.  With a baseline report, each named
category or property must also not be significantly worse than the
baseline: the bootstrap interval of (candidate − baseline) must include or
lie below 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import SafemanipError
from .stats import cluster_bootstrap_ratio


@dataclass
class GateRow:
    name: str
    kind: str
    rate: float | None
    upper: float | None
    limit: float | None
    baseline: float | None
    diff_ci: tuple[float, float] | None
    passed: bool
    why: str


def _entry(report: dict, name: str) -> tuple[str, dict]:
    if name in report['categories']:
        return 'category', report['categories'][name]
    if name in report['properties']:
        return 'property', report['properties'][name]
    raise SafemanipError(f'{name!r} is neither a category ({", ".join(report["categories"]) or "none"}) nor a '
                         f'property ({", ".join(report["properties"]) or "none"}) of the report')


def _diff_ci(cand: dict, base: dict, confidence: float, seed: int = 0, resamples: int = 2000):
    cv, cn = (np.array(cand['clusters'][k], float) for k in ('violations', 'triggers'))
    bv, bn = (np.array(base['clusters'][k], float) for k in ('violations', 'triggers'))
    if cn.sum() == 0 or bn.sum() == 0:
        return None
    rng = np.random.default_rng(seed)
    ci = rng.integers(0, cv.size, (resamples, cv.size))
    bi = rng.integers(0, bv.size, (resamples, bv.size))
    c_rate = cv[ci].sum(1) / np.maximum(cn[ci].sum(1), 1e-12)
    b_rate = bv[bi].sum(1) / np.maximum(bn[bi].sum(1), 1e-12)
    ok = (cn[ci].sum(1) > 0) & (bn[bi].sum(1) > 0)
    d = (c_rate - b_rate)[ok]
    alpha = 1 - confidence
    return float(np.quantile(d, alpha / 2)), float(np.quantile(d, 1 - alpha / 2))


def evaluate_gate(report: dict, limits: dict[str, float], baseline: dict | None = None,
                  confidence: float = 0.95) -> list[GateRow]:
    names = list(limits) or ([] if baseline is None else list(report['categories']))
    rows = []
    for name in names:
        kind, entry = _entry(report, name)
        v, n = entry['clusters']['violations'], entry['clusters']['triggers']
        ci = cluster_bootstrap_ratio(v, n, confidence)
        rate = entry['per_trigger_rate']
        limit = limits.get(name)
        passed, why = True, []
        if limit is not None:
            if ci is None:
                why.append('never triggered: no evidence either way (passes vacuously)')
            elif ci[1] < limit:
                why.append(f'upper bound {ci[1]:.4f} < {limit}')
            else:
                passed = False
                why.append(f'upper bound {ci[1]:.4f} >= {limit}')
        base_rate = diff = None
        if baseline is not None:
            try:
                _, base_entry = _entry(baseline, name)
            except SafemanipError:
                base_entry = None
            if base_entry is None:
                why.append('not in the baseline')
            else:
                base_rate = base_entry['per_trigger_rate']
                diff = _diff_ci(entry, base_entry, confidence)
                if diff is not None and diff[0] > 0:
                    passed = False
                    why.append(f'significantly worse than baseline (difference CI [{diff[0]:.4f}, {diff[1]:.4f}])')
                elif diff is not None:
                    why.append('not significantly worse than baseline')
        rows.append(GateRow(name, kind, rate, None if ci is None else ci[1], limit, base_rate, diff, passed,
                            '; '.join(why)))
    return rows
