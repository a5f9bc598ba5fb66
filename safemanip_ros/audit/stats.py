"""Uncertainty of the reported rates (SEMANTICS.md §5).

* :func:`clopper_pearson`: exact binomial interval for a proportion
  (success rate, rollout violation rate).
* :func:`cluster_bootstrap_ratio`: percentile interval of a pooled ratio
  ΣV/ΣN (per-trigger rate, exposure) resampling whole rollouts (clusters)
  with replacement; seeded, so the same inputs give the same interval.
"""

from __future__ import annotations

import numpy as np


def clopper_pearson(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float] | None:
    """Exact ``confidence`` interval for ``successes / trials``; None when trials == 0.

    The bounds are quantiles of beta distributions, taken from
    ``scipy.special.betaincinv`` (the inverse regularised incomplete beta
    function, equal to ``scipy.stats.beta.ppf``), imported here: importing
    ``scipy.stats`` took 1.3 s of every process that imported the audit, and
    ``scipy.special`` takes a quarter of that, paid only by a report."""
    if trials <= 0:
        return None
    from scipy.special import betaincinv

    alpha = 1.0 - confidence
    lo = 0.0 if successes == 0 else float(betaincinv(successes, trials - successes + 1, alpha / 2))
    hi = 1.0 if successes == trials else float(betaincinv(successes + 1, trials - successes, 1 - alpha / 2))
    return lo, hi


def cluster_bootstrap_ratio(numerators, denominators, confidence: float = 0.95, resamples: int = 2000,
                            seed: int = 0) -> tuple[float, float] | None:
    """Percentile interval of Σnum/Σden over clusters resampled with replacement.

    Resamples whose denominator sums to 0 are dropped; None when every
    cluster's denominator is 0.
    """
    num = np.asarray(numerators, dtype=float)
    den = np.asarray(denominators, dtype=float)
    if num.size == 0 or den.sum() <= 0:
        return None
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, num.size, size=(resamples, num.size))
    n_s, d_s = num[idx].sum(axis=1), den[idx].sum(axis=1)
    ratios = n_s[d_s > 0] / d_s[d_s > 0]
    alpha = 1.0 - confidence
    return float(np.quantile(ratios, alpha / 2)), float(np.quantile(ratios, 1 - alpha / 2))
