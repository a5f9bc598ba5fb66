"""Monitor runtime benchmarks: live tick latency and offline throughput of
the SafeManip suite, beside a baseline that works the way SafeManip's monitor
does (per frame, per instance: Python ``eval`` of the DFA edge guards on the
frame's predicate dict, recovery DFA while violated).  Prints figures and
ratios from one run; nothing here is a pass/fail test.

    python bench/bench_monitor.py [--quick]

The baseline is given the derived predicates (devices) for free — they are
precomputed by our program and not timed — so its figures flatter it.
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

from eval_baseline import EVAL_GLOBALS, guard_edges  # noqa: E402

from safemanip_ros.ltlf.cache import compile_cached  # noqa: E402
from safemanip_ros.ltlf.verdict import Verdict  # noqa: E402
from safemanip_ros.monitor.core import Monitor  # noqa: E402
from safemanip_ros.spec.ontology import Ontology, load_ontology, scene_from_mapping  # noqa: E402
from safemanip_ros.spec.suite import instantiate, load_suite  # noqa: E402

SUITE = REPO / 'config' / 'properties' / 'safemanip.yaml'


def bench_instances(entities: int):
    """The SafeManip suite bound over ``entities`` scene entities of a type that
    every template selects (10 global properties + 10 templates per entity)."""
    onto = Ontology()
    onto.types['thing'] = {'kind': {'microwave'}, 'hazard': {'contamination'},
                           'affordance': {'graspable', 'openable', 'closeable'}, 'role': {'storage_fixture'}}
    scene = scene_from_mapping({f'e{i:03d}': 'thing' for i in range(entities)}, onto, 'bench')
    return instantiate(load_suite(SUITE), onto, scene)


def kitchen_instances():
    onto = load_ontology([REPO / 'config' / 'ontology' / 'kitchen.yaml'])
    from safemanip_ros.spec.ontology import load_scene
    return instantiate(load_suite(SUITE), onto, load_scene(REPO / 'config' / 'scenes' / 'kitchen_demo.yaml', onto))


def held_signals(rng, B: int, T: int, P: int, p_true: float | None = None) -> np.ndarray:
    """Predicate streams whose values hold for 1-40 frames (like real
    grounding); each predicate's share of true runs is drawn from [0.02, 0.3]
    unless ``p_true`` fixes it."""
    n_runs = T // 8 + 2
    runs = rng.integers(1, 40, size=(B, P, n_runs))
    share = rng.uniform(0.02, 0.3, size=(1, P, 1)) if p_true is None else p_true
    vals = rng.random((B, P, n_runs)) < share
    out = np.zeros((B, T, P), bool)
    for b in range(B):
        for p in range(P):
            seq = np.repeat(vals[b, p], runs[b, p])[:T]
            out[b, :seq.size, p] = seq
    return out


class EvalBaseline:
    """SafeManip's runtime: each instance's DFA as edges with Python guard
    expressions, ``eval``'d against the frame's predicate dict each frame."""

    def __init__(self, monitor: Monitor) -> None:
        self.monitor = monitor
        self.main = [guard_edges(compile_cached(i.formula)) for i in monitor.instances]
        self.rec = [guard_edges(compile_cached(i.recovery)) for i in monitor.instances]
        self.main_dfas = [compile_cached(i.formula) for i in monitor.instances]
        self.rec_dfas = [compile_cached(i.recovery) for i in monitor.instances]
        self.names = sorted(monitor.program.index, key=monitor.program.index.get)

    def run(self, columns: np.ndarray) -> tuple[float, int]:
        """Step every instance over precomputed column frames ``bool[T, C]``;
        returns (seconds, violations)."""
        index = self.monitor.program.index
        frames = [{n: bool(row[index[n]]) for n in index} for row in columns]
        D = len(self.main)
        m = [d.initial for d in self.main_dfas]
        r = [d.initial for d in self.rec_dfas]
        violated = [False] * D
        count = 0
        t0 = time.perf_counter()
        for frame in frames:
            for i in range(D):
                opened_now = False
                if not violated[i]:
                    for code, target in self.main[i][m[i]]:
                        if eval(code, EVAL_GLOBALS, frame):
                            m[i] = target
                            break
                    if self.main_dfas[i].labels[m[i]] is Verdict.FALSE:
                        violated[i] = True
                        count += 1
                        r[i] = self.rec_dfas[i].initial
                        opened_now = True
                    else:
                        continue
                for code, target in self.rec[i][r[i]]:
                    if eval(code, EVAL_GLOBALS, frame):
                        r[i] = target
                        break
                if self.rec_dfas[i].labels[r[i]].accepting:
                    violated[i] = False
                    m[i] = self.main_dfas[i].initial
                    if not opened_now:          # §4 step 3: M re-reads the closing frame
                        for code, target in self.main[i][m[i]]:
                            if eval(code, EVAL_GLOBALS, frame):
                                m[i] = target
                                break
        return time.perf_counter() - t0, count


def columns_of(monitor: Monitor, values: np.ndarray) -> np.ndarray:
    """Per-frame column matrices (devices evaluated) for one rollout ``bool[T, P]``."""
    prog = monitor.program
    prog.reset()
    v = prog.new_frame_matrix()
    out = np.zeros((values.shape[0], prog.num_columns), bool)
    for t in range(values.shape[0]):
        v[monitor._pred_col, 0] = values[t]
        prog.evaluate(v)
        out[t] = v[:, 0]
    monitor.reset()
    return out


def bench_live(entities: int, frames: int) -> None:
    iset = bench_instances(entities)
    mon = Monitor(iset, batch=1)
    D, P = len(mon.instances), len(mon.predicates)
    rng = np.random.default_rng(1)
    values = held_signals(rng, 1, frames, P)[0]
    unknown = rng.random((frames, P)) < 0.001
    for t in range(50):
        mon.step(values[t], unknown[t])
    p50s, p99s = [], []
    for _ in range(3):          # several runs: the median of each figure, and its spread
        mon.reset()
        lat = []
        for t in range(frames):
            t0 = time.perf_counter()
            mon.step(values[t], unknown[t])
            lat.append(time.perf_counter() - t0)
        mon.finish()
        p50s.append(statistics.median(lat) * 1e3)
        p99s.append(float(np.percentile(lat, 99)) * 1e3)
    p50, p99 = statistics.median(p50s), statistics.median(p99s)
    base = EvalBaseline(mon)
    n_base = min(frames, 200)
    secs, _ = base.run(columns_of(mon, values[:n_base]))
    base_tick = secs / n_base * 1e3
    print(f'\n## Live tick: {D} property instances ({P} grounded predicates, {mon.program.num_columns} columns)')
    print(f'ours (median of 3 runs of {frames} frames): median {p50:.3f} ms ({min(p50s):.3f}-{max(p50s):.3f}), '
          f'p99 {p99:.3f} ms ({min(p99s):.3f}-{max(p99s):.3f}) per frame (target p99 < 1 ms)')
    print(f'eval baseline (devices not timed): {base_tick:.3f} ms per frame   ratio (baseline/ours p50) '
          f'{base_tick / p50:.1f}x, vs our p99 {base_tick / p99:.1f}x')


def bench_offline(rollouts: int, frames: int) -> None:
    iset = kitchen_instances()
    mon = Monitor(iset, batch=rollouts)
    D, P = len(mon.instances), len(mon.predicates)
    rng = np.random.default_rng(2)
    values = held_signals(rng, rollouts, frames, P)
    pf = rollouts * frames * D
    one = Monitor(iset, batch=1)
    n_base = min(rollouts, 10)
    base = EvalBaseline(one)
    columns = [columns_of(one, values[b]) for b in range(n_base)]
    # Ours and the baseline back to back, 3 times: this machine's speed moves from minute to
    # minute, so each ratio compares two timings taken together (median and spread printed).
    times, base_times = [], []
    for _ in range(3):
        t0 = time.perf_counter()
        results = mon.run(values)
        times.append(time.perf_counter() - t0)
        base_times.append(sum(base.run(c)[0] for c in columns))
    ratios = [pf / s / (n_base * frames * D / b) for s, b in zip(times, base_times)]
    secs = statistics.median(times)
    violations = sum(r.violations for res in results for r in res.instances)
    # Episodes are kept as array slices and made into tuples when first read: time reading them all.
    t0 = time.perf_counter()
    walked = sum(1 for res in results for r in res.instances for _ in r.episodes)
    walk_secs = time.perf_counter() - t0
    stress = held_signals(rng, rollouts, frames, P, p_true=0.3)
    t0 = time.perf_counter()
    stress_results = mon.run(stress)
    stress_secs = time.perf_counter() - t0
    stress_v = sum(r.violations for res in stress_results for r in res.instances)
    bsecs = statistics.median(base_times)
    base_rate = n_base * frames * D / bsecs
    print(f'\n## Offline: SafeManip suite ({D} instances, kitchen scene) over {rollouts} rollouts x {frames} frames')
    print(f'ours (median of 3): {secs:.2f} s, {pf / secs / 1e6:.1f} M property-frames/s, results included '
          f'({violations / rollouts:.1f} violations per rollout) (target >= 20 M)')
    print(f'  reading every episode as Episode tuples afterwards (made on first read): {walk_secs:.2f} s for '
          f'{walked:,} episodes ({pf / (secs + walk_secs) / 1e6:.1f} M property-frames/s with it)')
    print(f'ours, stress data (every predicate true 30% of the time): {pf / stress_secs / 1e6:.1f} M '
          f'property-frames/s ({stress_v / rollouts:.0f} violations per rollout)')
    print(f'eval baseline (devices not timed; median of 3 over {n_base} rollouts): {base_rate / 1e6:.3f} M '
          f'property-frames/s   ratio {statistics.median(ratios):.1f}x, median of 3 runs each timed beside its own '
          f'baseline run ({min(ratios):.1f}-{max(ratios):.1f}x) (target >= 30x)')
    print(f'  spread: ours {min(times):.2f}-{max(times):.2f} s, baseline {min(base_times):.2f}-{max(base_times):.2f} s')


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--quick', action='store_true')
    args = ap.parse_args()
    if args.quick:
        bench_live(10, 200)
        bench_offline(50, 100)
    else:
        bench_live(99, 2000)
        bench_offline(1000, 600)
    return 0


if __name__ == '__main__':
    sys.exit(main())
