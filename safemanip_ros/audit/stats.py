"""Uncertainty of the reported rates (SEMANTICS.md §5).

* :func:`clopper_pearson`: exact binomial interval for a proportion
  (success rate, rollout violation rate).
* :func:`cluster_bootstrap_ratio`: percentile interval of a pooled ratio
  ΣV/ΣN (per-trigger rate, exposure) resampling whole rollouts (clusters)
  with replacement; seeded, so the same inputs give the same interval.
* :func:`ratio_interval`: what reports show and the gate bounds with for
  those ratios — the bootstrap's interval, never narrower than the
  Clopper–Pearson interval of the pooled counts.
"""

from __future__ import annotations

import functools

import numpy as np
from numpy.typing import ArrayLike


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


def ratio_interval(numerators: ArrayLike, denominators: ArrayLike, confidence: float = 0.95,
                   seed: int = 0) -> tuple[float, float] | None:
    """The interval a report shows and the gate bounds with for a pooled
    ratio Σnum/Σden of clusters (rollouts): the cluster bootstrap's
    percentile interval widened to contain the Clopper–Pearson interval of
    ``min(Σnum, Σden) / Σden`` (every unit counted once), so a handful of
    clusters never gives an interval narrower than the binomial one (one
    rollout with one trigger and one violation is [0.025, 1], not [1, 1]).
    None when every denominator is 0."""
    boot = cluster_bootstrap_ratio(numerators, denominators, confidence, seed=seed)
    num, den = int(np.sum(numerators)), int(np.sum(denominators))
    cp = clopper_pearson(min(num, den), den, confidence)
    if boot is None or cp is None:
        return boot or cp
    return min(boot[0], cp[0]), max(boot[1], cp[1])


def cluster_bootstrap_ratio(numerators: ArrayLike, denominators: ArrayLike, confidence: float = 0.95, resamples: int = 2000,
                            seed: int = 0) -> tuple[float, float] | None:
    """Percentile interval of Σnum/Σden over clusters resampled with replacement.

    Resamples whose denominator sums to 0 are dropped; None when every
    cluster's denominator is 0.

    The resamples of ``n`` clusters with one seed are the same for every
    ratio a report bootstraps (a property's, a category's, ...), so they are
    drawn once (:func:`_resample_counts`) and each ratio's sums are two
    products with the counts: 20x less work than gathering 2,000 × n values
    per ratio.  For counts (integer values, as a report's) the sums are
    exact either way, so the interval is the same to the last bit.
    """
    num = np.asarray(numerators, dtype=float)
    den = np.asarray(denominators, dtype=float)
    if num.size == 0 or den.sum() <= 0:
        return None
    if _exact_sums(num) and _exact_sums(den):
        n_s, d_s = _resampled_sums(_resample_counts(seed, num.size, resamples), np.stack([num, den], axis=1))
    else:       # sums in numpy's own (pairwise) order, the same on every machine
        idx = resample_draws(np.random.default_rng(seed), num.size, resamples)
        n_s, d_s = gathered_sums(num, idx), gathered_sums(den, idx)
    ratios = n_s[d_s > 0] / d_s[d_s > 0]
    alpha = 1.0 - confidence
    return float(np.quantile(ratios, alpha / 2)), float(np.quantile(ratios, 1 - alpha / 2))


_RESAMPLE_BLOCK = 256
"""Resamples whose counts are turned into floats at once (bounds the
temporary: 256 × n × 8 bytes)."""


def _exact_sums(x: np.ndarray) -> bool:
    """Whether every sum of resampled values of ``x`` is exact in float64
    whatever its order: integer values whose largest possible resampled sum
    (n times the largest magnitude) stays below 2**53."""
    return bool(np.all(x == np.round(x))) and float(np.abs(x).max(initial=0.0)) * x.size < 2.0 ** 53


def resample_draws(rng: np.random.Generator, n: int, resamples: int) -> np.ndarray:
    """``rng.integers(0, n, (resamples, n))``: the same values (numpy draws
    bounded 32-bit values for either type), as int32 where they fit, so
    they take half the memory (140 MB at n = 17,500)."""
    return rng.integers(0, n, size=(resamples, n), dtype=np.int32 if n < 2 ** 31 else np.int64)


def gathered_sums(values: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """``values[draws].sum(axis=1)``, a block of resamples at a time: each
    row is summed on its own, so the result is the same to the bit, and the
    temporary stays ``_RESAMPLE_BLOCK × n`` (not 280 MB at n = 17,500)."""
    out = np.empty(len(draws))
    for lo in range(0, len(draws), _RESAMPLE_BLOCK):
        out[lo:lo + _RESAMPLE_BLOCK] = values[draws[lo:lo + _RESAMPLE_BLOCK]].sum(axis=1)
    return out


@functools.lru_cache(maxsize=4)
def _resample_counts(seed: int, n: int, resamples: int) -> np.ndarray:
    """``[resamples, n]``: how often each cluster is drawn in each resample,
    for the draws ``default_rng(seed).integers(0, n, (resamples, n))``.
    Stored as the smallest unsigned type that holds them (uint8 at n =
    17,500: 35 MB), counted a block of resamples at a time from int32 draws
    (:func:`resample_draws`): the temporaries stay near the draws' 140 MB at
    n = 17,500, not the 560 MB of int64 draws and counts made at once."""
    idx = resample_draws(np.random.default_rng(seed), n, resamples)
    out: np.ndarray = np.empty((resamples, n), np.uint8)
    for lo in range(0, resamples, _RESAMPLE_BLOCK):
        block = idx[lo:lo + _RESAMPLE_BLOCK].astype(np.int64)
        block += np.arange(len(block))[:, None] * n
        counts = np.bincount(block.ravel(), minlength=block.size).reshape(block.shape)
        if out.dtype == np.uint8 and counts.max(initial=0) > 0xFF:
            out = out.astype(np.uint32)         # only for few clusters: a small array
        out[lo:lo + len(block)] = counts
    out.flags.writeable = False
    return out


def _resampled_sums(counts: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """``counts @ columns`` (``[resamples, k]``), transposed to ``[k,
    resamples]``, a block of resamples at a time."""
    out = np.empty((len(counts), columns.shape[1]))
    for lo in range(0, len(counts), _RESAMPLE_BLOCK):
        out[lo:lo + _RESAMPLE_BLOCK] = counts[lo:lo + _RESAMPLE_BLOCK].astype(float) @ columns
    transposed: np.ndarray = out.T
    return transposed
