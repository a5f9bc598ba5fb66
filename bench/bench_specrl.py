"""SpecRLBench evaluation and the Gymnasium wrappers, measured.

1. Per-step cost of the wrappers beside the bare environment, in one run:
   LetterWorld alone, with SpecMonitor on one specification, on the whole
   SpecRLBench property suite; a 16-environment SyncVectorEnv alone and with
   SpecMonitorVector (per sub-environment step).
2. The evaluator at SpecRLBench's scale: 5 seeds x 100 trajectories for
   every specification of the paper set (fixed families and the Letter
   complexity study), as rollout logs on disk: time to load them and to
   evaluate, and trajectories per second.

    python bench/bench_specrl.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gymnasium  # noqa: E402

from safemanip_ros.gym import LetterWorld, SpecMonitor, SpecMonitorVector  # noqa: E402
from safemanip_ros.specrl import families  # noqa: E402
from safemanip_ros.specrl.evaluate import evaluate  # noqa: E402
from safemanip_ros.specrl.traces import load  # noqa: E402

SUITE = Path(__file__).resolve().parents[1] / 'config' / 'properties' / 'specrlbench.yaml'


def per_step_us(env, steps: int, vector: int = 0) -> float:
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    actions = rng.integers(4, size=(steps, vector)) if vector else rng.integers(4, size=steps)
    t0 = time.perf_counter()
    for a in actions:
        _, _, term, trunc, _ = env.step(a)
        if not vector and (term or trunc):
            env.reset()
    return (time.perf_counter() - t0) / steps / max(1, vector) * 1e6


def wrapper_overhead(steps: int) -> None:
    spec = families.FIXED['letter_ind'][0].formula
    bare = per_step_us(LetterWorld(), steps)
    one = per_step_us(SpecMonitor(LetterWorld(), spec), steps)
    suite = per_step_us(SpecMonitor(LetterWorld(), suite=[str(SUITE)]), steps)
    n = 16
    vbare = per_step_us(gymnasium.vector.SyncVectorEnv([LetterWorld for _ in range(n)]), steps // n, n)
    vmon = per_step_us(SpecMonitorVector(gymnasium.vector.SyncVectorEnv([LetterWorld for _ in range(n)]), spec),
                       steps // n, n)
    print(f'per step ({steps} steps; vector: {n} envs, per sub-environment step):')
    print(f'  LetterWorld            {bare:8.1f} us')
    print(f'  + SpecMonitor, 1 spec  {one:8.1f} us   overhead {one - bare:7.1f} us ({one / bare:.1f}x)')
    print(f'  + SpecMonitor, suite   {suite:8.1f} us   overhead {suite - bare:7.1f} us ({suite / bare:.1f}x; '
          f'{len(SpecMonitor(LetterWorld(), suite=[str(SUITE)]).core.names)} instances)')
    print(f'  SyncVectorEnv          {vbare:8.1f} us')
    print(f'  + SpecMonitorVector    {vmon:8.1f} us   overhead {vmon - vbare:7.1f} us ({vmon / vbare:.1f}x)')


def evaluator(seeds: list[int], per_seed: int, per_cell: int) -> None:
    specs = families.paper_set(seed=0, per_cell=per_cell)
    rng = np.random.default_rng(0)
    letters = np.array(list(families.LETTERS) + ['b0', 'g0', 'm0', 'y0', 'b1', 'g1', 'm1', 'y1', 'b', 'g', 'm', 'y',
                                                  'gb', 'gg', 'gm', 'gy', 'ab', 'ag', 'am', 'ay'])
    with tempfile.TemporaryDirectory() as tmp:
        n = 0
        t0 = time.perf_counter()
        for seed in seeds:
            path = Path(tmp) / f'seed_{seed}.jsonl'
            with path.open('w') as fh:
                for spec in specs:
                    for _ in range(per_seed):
                        length = int(rng.integers(5, 76))
                        steps = [[str(x)] if rng.random() < 0.3 else [] for x in rng.choice(letters, length)]
                        fh.write(json.dumps({'seed': seed, 'spec': spec.name, 'formula': spec.formula,
                                             'propositions': steps}) + '\n')
                        n += 1
        write_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        trajectories = load([tmp], [])
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        rows = evaluate(specs, trajectories)
        eval_s = time.perf_counter() - t0
    steps = sum(len(t.steps) for t in trajectories)
    print(f'evaluator: {len(specs)} specifications x {len(seeds)} seeds x {per_seed} trajectories = {n} '
          f'trajectories, {steps} steps (rollout logs written in {write_s:.1f} s)')
    print(f'  load {load_s:6.1f} s   evaluate {eval_s:6.1f} s   total {load_s + eval_s:6.1f} s   '
          f'{n / (load_s + eval_s):,.0f} trajectories/s   ({sum(len(r.seeds) for r in rows)} spec x seed rows)')


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--quick', action='store_true', help='fewer steps, one seed, ten trajectories')
    args = p.parse_args()
    wrapper_overhead(2_000 if args.quick else 20_000)
    if args.quick:
        evaluator([1], 10, 1)
    else:
        evaluator([1, 11, 22, 33, 44], 100, 3)
    return 0


if __name__ == '__main__':
    sys.exit(main())
