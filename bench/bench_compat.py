"""What the SafeManip compatibility profile costs: the same rollouts monitored
with the default SafeManip suite and with ``--profile safemanip-compat``'s
suite (its onset devices, restarting timers, ``any()`` over the scene,
next-frame recovery and primary verdict), offline (whole rollouts, batched)
and live (one frame per tick).  Prints both side by side and their ratio from
one run; nothing here is a pass/fail test.

    python bench/bench_compat.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / 'bench'))

from bench_monitor import held_signals  # noqa: E402

from safemanip_ros.monitor.core import Monitor  # noqa: E402
from safemanip_ros.spec.ontology import load_ontology, load_scene  # noqa: E402
from safemanip_ros.spec.suite import instantiate, load_suite  # noqa: E402

PROPERTIES = REPO / 'config' / 'properties'


def instances(name: str):
    onto = load_ontology(sorted((REPO / 'config' / 'ontology').glob('*.yaml')))
    return instantiate(load_suite(PROPERTIES / name), onto,
                       load_scene(REPO / 'config' / 'scenes' / 'kitchen_demo.yaml', onto))


def offline(monitor: Monitor, values: np.ndarray, repeats: int) -> float:
    """Frames per second of ``Monitor.run`` over the batch (best of ``repeats``)."""
    B, T, _ = values.shape
    monitor.resize(B)
    best = float('inf')
    for _ in range(repeats):
        t0 = time.perf_counter()
        monitor.run(values)
        best = min(best, time.perf_counter() - t0)
    return B * T / best


def live(monitor: Monitor, values: np.ndarray) -> tuple[float, float]:
    """Median and p99 microseconds of one ``step`` (one rollout)."""
    monitor.resize(1)
    ticks = []
    for t in range(values.shape[0]):
        t0 = time.perf_counter()
        monitor.step(values[t])
        ticks.append((time.perf_counter() - t0) * 1e6)
    monitor.finish()
    ticks.sort()
    return statistics.median(ticks), ticks[int(0.99 * (len(ticks) - 1))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--quick', action='store_true', help='fewer rollouts (smoke run)')
    args = ap.parse_args()
    B, T, repeats = (64, 400, 1) if args.quick else (512, 1200, 3)
    suites = {'default': instances('safemanip.yaml'), 'compat': instances('safemanip_compat.yaml')}
    # Both suites read the same grounded predicates: one set of rollouts for both.
    preds = sorted(set(suites['default'].predicates) | set(suites['compat'].predicates))
    rng = np.random.default_rng(0)
    signals = held_signals(rng, B, T, len(preds))                  # [B, T, P] over the union
    figures = {}
    for name, iset in suites.items():
        monitor = Monitor(iset)
        cols = [preds.index(p) for p in monitor.predicates]
        values = np.ascontiguousarray(signals[:, :, cols])
        fps = offline(monitor, values, repeats)
        median_us, p99_us = live(monitor, values[0])
        figures[name] = (len(iset.instances), monitor.program.num_columns, fps, median_us, p99_us)
    print(f'{B} rollouts x {T} frames, kitchen_demo scene')
    print(f"{'profile':10s} {'instances':>9s} {'columns':>8s} {'offline frames/s':>17s} {'live median us':>15s} "
          f"{'live p99 us':>12s}")
    for name, (n, c, fps, med, p99) in figures.items():
        print(f'{name:10s} {n:9d} {c:8d} {fps:17,.0f} {med:15.1f} {p99:12.1f}')
    d, c = figures['default'], figures['compat']
    print(f'compat / default: offline throughput x{c[2] / d[2]:.2f}, live median x{c[3] / d[3]:.2f}, '
          f'live p99 x{c[4] / d[4]:.2f}')


if __name__ == '__main__':
    main()
