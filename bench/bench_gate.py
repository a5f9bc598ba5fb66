"""The deployment gate's error rates and decision times, exact (dynamic
programming over the violation count, no simulation), the anytime-valid
sequential test (safemanip_ros/audit/sequential.py) beside the fixed-sample
rule (Clopper-Pearson upper bound below the limit, at least 30 triggers)
re-checked after every trigger.  Limit 5 %, alpha 5 %.

    python bench/bench_gate.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import safemanip_ros.audit.sequential as sequential  # noqa: E402  (its step-by-step and scanning boundaries)
from safemanip_ros.audit.gate import fixed_rule_boundary  # noqa: E402
from safemanip_ros.audit.sequential import FAIL, PASS, SequentialTest, exact_run, exact_stopping, family  # noqa: E402
from safemanip_ros.audit.stats import clopper_pearson  # noqa: E402

LIMIT, ALPHA = 0.05, 0.05


def fixed_rule(n_max: int, rate: float, min_triggers: int = 30) -> float:
    """P(the fixed rule passes at some check up to n_max), checked after every trigger."""
    return exact_stopping(fixed_rule_boundary(n_max, LIMIT, ALPHA, min_triggers), None, rate, n_max).pass_by[-1]


def fixed_design_n(rate: float, power: float = 0.95) -> int:
    """The smallest fixed sample that passes a true ``rate`` with ``power`` (one look, Clopper-Pearson)."""
    from scipy import stats
    for n in range(30, 5000):
        k_max = max((k for k in range(n + 1) if clopper_pearson(k, n, 1 - ALPHA)[1] < LIMIT), default=-1)
        if k_max >= 0 and stats.binom.cdf(k_max, n, rate) >= power:
            return n
    return -1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--quick', action='store_true', help='checks up to 500 observations (default 2,000)')
    args = p.parse_args()
    n_max = 500 if args.quick else 2000
    t0 = time.monotonic()
    test = SequentialTest(LIMIT, ALPHA)
    print(f'## Gate at limit {LIMIT:.0%}, alpha {ALPHA:.0%}, checked after every observation up to {n_max} (exact)')
    at = exact_run(test, LIMIT, n_max)
    fixed_at = fixed_rule(min(n_max, 1000), LIMIT)
    print(f'false PASS at the limit:      sequential {at.pass_by[-1]:.4f}   fixed rule re-checked '
          f'{fixed_at:.4f} (to {min(n_max, 1000)})   target <= {ALPHA}')
    print(f'false FAIL at the limit:      sequential {at.fail_by[-1]:.4f}   target <= {ALPHA}')
    pass_k, _ = test.boundaries(n_max)
    zero = int(np.flatnonzero(pass_k >= 0)[0]) + 1
    fixed_zero = next(n for n in range(30, 5000) if clopper_pearson(0, n, 1 - ALPHA)[1] < LIMIT)
    print(f'zero violations pass after:   sequential {zero}   fixed (one look) {fixed_zero}   target <= 75')
    good = exact_run(test, 0.01, n_max)
    print(f'true 1 %: PASS median {good.quantile(PASS, 0.5)}, 90th percentile {good.quantile(PASS, 0.9)}   '
          f'fixed design for 95 % power: {fixed_design_n(0.01)}   targets <= 135, <= 250')
    bad = exact_run(test, 0.20, min(n_max, 400))
    print(f'true 20 %: FAIL median {bad.quantile(FAIL, 0.5)}, 90th percentile {bad.quantile(FAIL, 0.9)}   '
          f'target median <= 30')
    eight = family({f'p{i}': LIMIT for i in range(8)}, ALPHA)['p0']
    at8 = exact_run(eight, LIMIT, n_max)
    good8 = exact_run(eight, 0.01, n_max)
    print(f'8 limits at family-wise {ALPHA:.0%} (each {eight.alpha:.4f}): false PASS {8 * at8.pass_by[-1]:.4f} '
          f'(sum over 8), false FAIL {8 * at8.fail_by[-1]:.4f}; true 1 % PASS median {good8.quantile(PASS, 0.5)}, '
          f'90th percentile {good8.quantile(PASS, 0.9)}')
    t = time.perf_counter()
    for n in range(1, 1001):
        test.decide(n, n // 50)
    print(f'one decision: {(time.perf_counter() - t) / 1000 * 1e6:.0f} us')
    # The exact error rates above need both boundaries at every n: followed a step at a time (boundaries())
    # beside the scan of every count at every n (the way before), on a test not used above (uncached).
    fresh = SequentialTest(0.2, 0.05)
    t = time.perf_counter()
    stepped = sequential._boundaries(fresh, n_max)
    t_step = time.perf_counter() - t
    t = time.perf_counter()
    scanned = ([sequential._scan(fresh, n, above=False) for n in range(1, n_max + 1)],
               [sequential._scan(fresh, n, above=True) for n in range(1, n_max + 1)])
    t_scan = time.perf_counter() - t
    same = stepped[0].tolist() == scanned[0] and stepped[1].tolist() == scanned[1]
    print(f'boundaries up to n = {n_max}: step by step {t_step:.2f} s, scan of every count {t_scan:.2f} s '
          f'({t_scan / t_step:.1f}x); identical: {same}   ({time.monotonic() - t0:.1f} s in all)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
