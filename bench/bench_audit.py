"""Audit throughput beside the time rosbags alone needs to read and
deserialize the same bags, in the same run:

* predicate bags (generated: 57 predicates per frame), with 1 and 2 local
  workers.  Targets: >= 30,000 frames/s per core, >= 10x rosbags' bare read
  + deserialize;
* raw-input bags (robosuite Lift rollouts recorded by the physics bridge:
  joint states, TF, contacts; grounded offline), object poses at simulator
  truth and from a realistic detector interleaved on /tf.  Target: one
  worker takes at most the time rosbags needs to read and deserialize the
  same bags;
* the report for 1,000 rollouts.  Target: < 30 s;
* what one audit process pays once (importing the engine, its first audit,
  reading .jsonl traces), each beside its baseline;
* this machine's own scaling from 1 to 2 processes, for pure-Python work and
  for memory-streaming numpy work, beside the audit's (near-linear is the
  target; the machine sets the ceiling);
* scaling at fleet scale: about 200 predicate bags of mixed lengths on 1 and
  2 local workers and on Ray, beside the same audit's own ceiling on this
  machine (two processes each auditing half of the bags at once, against
  one alone).

    python bench/bench_audit.py [--quick] [--raw-bags DIR] [--raw-only]

``--raw-bags DIR`` reuses (or records into) ``DIR/truth`` and
``DIR/realistic``; otherwise the rollouts are recorded into a scratch folder
first (about 4 s each).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rosbags.rosbag2 import Reader  # noqa: E402

import safemanip_ros.audit.engine as engine_module  # noqa: E402
from safemanip_ros.audit.engine import AuditConfig, run_audit  # noqa: E402
from safemanip_ros.bag.typestore import typestore  # noqa: E402
from safemanip_ros.bag.writer import SplitBagWriter  # noqa: E402
from safemanip_ros.monitor.build import build_monitor  # noqa: E402

SUITE = str(REPO / 'config' / 'properties' / 'safemanip.yaml')
SCENE = str(REPO / 'config' / 'scenes' / 'kitchen_demo.yaml')


def make_bags(root: Path, bags: int, frames: int, seed: int = 0) -> list[str]:
    ts = typestore()
    Arr, Pred = ts.types['safemanip_ros/msg/PredicateArray'], ts.types['safemanip_ros/msg/Predicate']
    Time, Header = ts.types['builtin_interfaces/msg/Time'], ts.types['std_msgs/msg/Header']
    predicates = build_monitor([SUITE], scene=SCENE).predicates
    rng = np.random.default_rng(seed)
    for b in range(bags):
        w = SplitBagWriter(root / f'bag{b:03d}', 'mcap', split_s=10.0)
        w.add_topic('/predicates', 'safemanip_ros/msg/PredicateArray')
        state = rng.random(len(predicates)) < 0.2
        for t in range(frames):
            flip = rng.random(len(predicates)) < 0.03
            state = state ^ flip
            stamp = Time(sec=t // 20, nanosec=(t % 20) * 50_000_000)
            msg = Arr(header=Header(stamp=stamp, frame_id=''), seq=t, predicates=[
                Pred(name=p, value=bool(v), unknown=False, source='bench', data_stamp=stamp)
                for p, v in zip(predicates, state)])
            w.write('/predicates', t * 50_000_000, ts.serialize_cdr(msg, 'safemanip_ros/msg/PredicateArray'))
        w.close()
    return [str(root)]


def read_only(bags: list[Path]) -> int:
    """Read and deserialize every message of ``bags`` with rosbags; the count."""
    ts = typestore()
    n = 0
    for bag in bags:
        with Reader(bag) as r:
            for c, _, raw in r.messages():
                ts.deserialize_cdr(raw, c.msgtype)
                n += 1
    return n


RAW_LEVELS = ('truth', 'realistic')
"""The perception levels the raw-input section records at: simulator truth,
and a realistic detector's poses interleaved on /tf with the robot's links."""


def raw_input_bags(root: Path, rollouts: int, level: str = 'truth') -> list[Path]:
    """``rollouts`` robosuite Lift rollouts (every fault kind in turn), object
    poses at perception ``level``, recorded once into ``root/level`` and reused."""
    from safemanip_ros.sim.faithfulness import record, rollout_plan
    from safemanip_ros.sim.perception import LEVELS
    return record(rollout_plan(rollouts, 4000, ('Lift',)), root / level, progress=lambda line: None,
                  perception=LEVELS[level])


def raw_throughput(root: Path, rollouts: int, out: Path, best_of: int, copies: int = 4) -> None:
    """The raw-input audit at each of :data:`RAW_LEVELS`."""
    for level in RAW_LEVELS:
        raw_level(root, rollouts, out / level, best_of, copies, level)


def raw_level(root: Path, rollouts: int, out: Path, best_of: int, copies: int, level: str) -> None:
    """The raw-input audit of ``rollouts`` recorded Lift rollouts, each
    audited ``copies`` times (as copies under other names: recording costs
    about 4 s a rollout, and an audit of a dozen short bags would weigh a
    worker pool's start as much as the work), beside rosbags' bare read and
    deserialize of the same bags (best of ``best_of`` each, interleaved)."""
    from safemanip_ros.resources import config_path, default_suites
    t = time.perf_counter()
    recorded = raw_input_bags(root, rollouts, level)
    t_record = time.perf_counter() - t
    bags = []
    for k in range(copies):
        for bag in recorded:
            copy = out / 'bags' / f'{bag.name}_copy{k}'
            shutil.copytree(bag, copy)
            bags.append(copy)
    cfg = AuditConfig(tuple(str(p) for p in default_suites()),
                      robot_config=str(config_path('robots', 'robosuite_lift.yaml')))
    run_audit([str(bags[0])], cfg, out / 'warm')       # suite compiled and cached, as in a long audit
    times = {1: float('inf'), 2: float('inf')}
    t_read = float('inf')
    for rep in range(best_of):      # interleaved: these bags take about a second
        t = time.perf_counter()
        n_msgs = read_only(bags)
        t_read = min(t_read, time.perf_counter() - t)
        for workers in times:
            t = time.perf_counter()
            results, skipped = run_audit([str(b) for b in bags], cfg, out / f'audit{workers}-{rep}', workers=workers)
            times[workers] = min(times[workers], time.perf_counter() - t)
    frames = sum(e['frames'] for r in results for e in r['episodes'])
    grounding = grounding_only(recorded, cfg)
    machine = machine_line(best_of)
    print(f'\n## Raw-input audit, object poses at {level}: {len(bags)} robosuite Lift bags ({len(recorded)} '
          f'rollouts recorded in {t_record:.0f} s, each audited {copies} times under other names), {frames} frames, '
          f'{n_msgs} messages (joint states, TF, contacts), robosuite_lift.yaml, shipped suites')
    print(f'rosbags read + deserialize only (best of {best_of}): {t_read:.2f} s ({frames / t_read:,.0f} frames/s)')
    for workers, dt in times.items():
        print(f'audit (grounded offline, best of {best_of}), {workers} worker(s): {dt:.2f} s ({frames / dt:,.0f} frames/s, '
              f'{frames / dt / workers:,.0f} per worker), {t_read / dt:.2f}x rosbags\' bare rate; {len(skipped)} '
              f'skipped')
    print(f'one worker takes {times[1] / t_read:.2f}x the time of rosbags\' bare decode of the same bags '
          f'(target: <= 1.0x)')
    print(f'2 workers: {times[1] / times[2]:.2f}x one worker; {machine}')
    for label, dt in grounding.items():
        print(f'grounding only (read_bag, no monitor; the {len(recorded)} rollouts once), {label}: {dt:.2f} s '
              f'({frames / copies / dt:,.0f} frames/s)')


def grounding_only(bags: list[Path], cfg: AuditConfig, repeats: int = 3) -> dict[str, float]:
    """Best-of-``repeats`` seconds to build the frames of ``bags`` column-wise
    and message by message (interleaved, same process)."""
    from safemanip_ros.audit.engine import _monitor, _robot
    from safemanip_ros.audit.rollouts import read_bag
    predicates = list(_monitor(cfg).predicates)
    robot = _robot(cfg.robot_config)
    best = {'column-wise': float('inf'), 'message by message (the path before)': float('inf')}
    for _ in range(repeats):
        for label, columnar in zip(best, (True, False)):
            t = time.perf_counter()
            for bag in bags:
                read_bag(bag, predicates, cfg.rate_hz, cfg.staleness_s, robot, columnar=columnar)
            best[label] = min(best[label], time.perf_counter() - t)
    return best


FLEET_FRAMES = (200, 400, 800, 1200, 1600, 2000)
"""Rollout lengths of the fleet section's bags: rollouts end when their task
does, so a fleet's bags differ in length."""


def fleet_bags(root: Path, per_length: int, copies: int) -> list[Path]:
    """``per_length`` generated predicate bags of each of
    :data:`FLEET_FRAMES`, each linked ``copies`` times under other names (hard
    links: the same bytes, other sources to the audit), in shuffled order."""
    distinct: list[Path] = []
    for k, frames in enumerate(FLEET_FRAMES):
        make_bags(root / 'distinct' / f'len{frames}', per_length, frames, seed=10 + k)
        distinct += sorted((root / 'distinct' / f'len{frames}').iterdir())
    order = np.random.default_rng(0).permutation(len(distinct) * copies)
    fleet = []
    for i, j in enumerate(order):
        fleet.append(root / 'fleet' / f'rollout{i:04d}')
        shutil.copytree(distinct[j % len(distinct)], fleet[-1], copy_function=os.link)
    return fleet


def _cpu_s() -> float:
    """CPU seconds of this process and of its reaped children so far."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _timed_audit(job: tuple[list[str], AuditConfig, Path]) -> float:
    inputs, cfg, out = job
    t = time.perf_counter()
    run_audit(inputs, cfg, out, detach_timelines=True)
    return time.perf_counter() - t


BEFORE = '2 workers, near-equal chunks (the task plan before)'


def _equal_chunks(sizes: list[int], workers: int) -> list[list[int]]:
    """The audit's task plan before :func:`~safemanip_ros.audit.engine.plan_tasks`
    (the baseline): near-equal numbers of sources, in input order, at most
    64 per chunk and at least one chunk per worker."""
    n = max(min(len(sizes), max(1, workers)), -(-len(sizes) // engine_module.CHUNK)) if sizes else 0
    return [list(range(len(sizes)))[i::n] for i in range(n)]


@contextmanager
def _planned_by(plan: Callable[[list[int], int], list[list[int]]]) -> Iterator[None]:
    kept = engine_module.plan_tasks
    engine_module.plan_tasks = plan
    try:
        yield
    finally:
        engine_module.plan_tasks = kept


def fleet_scaling(root: Path, cfg: AuditConfig, per_length: int, copies: int, repeats: int, ray_too: bool) -> None:
    """A fleet-size audit (mixed-length predicate bags) on 1 and 2 local
    workers and, with ``ray_too``, on a 2-CPU local Ray cluster (already
    started), as ``safemanip audit`` runs it (detached results); medians of
    ``repeats`` interleaved runs, with their ranges.  Beside them the same
    audit's own ceiling here: two forked processes each auditing half of the
    bags (alternate ones by size) with one worker at once, against one
    auditing its half alone."""
    bags = fleet_bags(root, per_length, copies)
    inputs = [str(root / 'fleet')]
    run_audit(inputs, cfg, root / 'warm')           # the suite built, the code warm, in this process
    runs: dict[str, list[float]] = {'1 worker': [], '2 workers': [], BEFORE: []}
    if ray_too:
        runs['Ray, 2 workers'] = []
        runs[f'Ray, {BEFORE}'] = []
        run_audit(inputs, cfg, root / 'warm-ray', workers=2, engine='ray')    # each Ray worker builds it once
    busy: list[float] = []
    by_size = sorted(map(str, bags), key=lambda b: -engine_module._source_bytes(b))
    halves = [by_size[0::2], by_size[1::2]]
    alone: list[float] = []
    pair: list[float] = []
    results: list[dict] = []
    for rep in range(repeats):
        for label in runs:
            engine, workers = ('ray', 2) if label.startswith('Ray') else ('local', 1 if label == '1 worker' else 2)
            plan = _equal_chunks if label.endswith(BEFORE) else engine_module.plan_tasks
            cpu, t = _cpu_s(), time.perf_counter()
            with _planned_by(plan):
                results, _ = run_audit(inputs, cfg, root / f'{len(runs[label])}-{label}', workers=workers,
                                       engine=engine, detach_timelines=True)
            runs[label].append(time.perf_counter() - t)
            if label == '2 workers':
                busy.append((_cpu_s() - cpu) / (2 * runs[label][-1]))
        alone += _forked_map(_timed_audit, [(halves[0], cfg, root / f'alone-{rep}')])
        pair.append(max(_forked_map(_timed_audit, [(h, cfg, root / f'pair{k}-{rep}') for k, h in enumerate(halves)])))
    frames = sum(e['frames'] for r in results for e in r['episodes'])
    median = {label: statistics.median(v) for label, v in runs.items()}
    ceiling = 2 * statistics.median(alone) / statistics.median(pair)
    one = median['1 worker']
    print(f'\n## Scaling at fleet scale: {len(bags)} predicate bags of {min(FLEET_FRAMES)}-{max(FLEET_FRAMES)} '
          f'frames ({frames:,} frames; {len(bags) // copies} distinct bags, each under {copies} names), as '
          f'safemanip audit runs it; medians of {repeats} interleaved runs (range)')
    for label, times in runs.items():
        extra = '' if label == '1 worker' else f', {one / median[label]:.2f}x one worker'
        if label.endswith(BEFORE):
            now = median[label.replace(BEFORE, '2 workers')]
            extra += f'; the plan now is {median[label] / now:.2f}x as fast'
        if label == '2 workers':
            extra += f', workers busy {statistics.median(busy):.0%} of the time (CPU time / (2 x wall))'
        print(f'{label}: {median[label]:.2f} s ({min(times):.2f}-{max(times):.2f}; {frames / median[label]:,.0f} '
              f'frames/s){extra}')
    print(f'this audit\'s own ceiling here: two processes auditing half of the bags each at once, against one '
          f'alone: {ceiling:.2f}x (alone {statistics.median(alone):.2f} s, both {statistics.median(pair):.2f} s). '
          f'2 workers reach {one / median["2 workers"] / ceiling:.0%} of it'
          + (f', Ray {one / median["Ray, 2 workers"] / ceiling:.0%}' if ray_too else '')
          + f'; {machine_line(repeats)}')
    # The same comparison in wall time: the halves at once are the least this machine can take for
    # the whole audit on two processes (the ratio above also carries the fork's cost into `alone`).
    both = statistics.median(pair)
    print(f'the whole audit on 2 workers: {median["2 workers"]:.2f} s, {median["2 workers"] / both:.2f}x the time of '
          f'both halves at once' + (f'; on Ray {median["Ray, 2 workers"]:.2f} s, '
                                    f'{median["Ray, 2 workers"] / both:.2f}x' if ray_too else ''))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument('--quick', action='store_true')
    ap.add_argument('--raw-bags', type=Path, help='folder of robosuite Lift bags to reuse or record into')
    ap.add_argument('--raw-only', action='store_true', help='the raw-input section alone')
    args = ap.parse_args()
    best_of = 1 if args.quick else 3       # the machine line and the raw-input audits
    bags, frames = (4, 200) if args.quick else (40, 1200)
    tmp = Path(tempfile.mkdtemp())
    try:
        if args.raw_only:
            raw_throughput(args.raw_bags or tmp / 'raw', 1 if args.quick else 12, tmp / 'raw_audit', best_of)
            return 0
        inputs = make_bags(tmp / 'bags', bags, frames)
        t = time.perf_counter()
        n = read_only(sorted((tmp / 'bags').iterdir()))
        t_read = time.perf_counter() - t
        cfg = AuditConfig((SUITE,), SCENE, '', (), 20.0, 0.25, '', 'any')
        print(f'\n## Audit throughput: {bags} bags x {frames} frames (57 predicates per frame, kitchen scene, '
              f'32 property instances)')
        print(f'rosbags read + deserialize only: {t_read:.2f} s ({n / t_read:,.0f} frames/s)')
        # The results carried in memory (run_audit's default), for report_time below.
        results, _ = audit_line(inputs, cfg, tmp, 'local', 1, n, t_read, 'first audit in this process, results in '
                                'memory')
        # What a long audit sees from its second chunk on: the suite is built, the code warm.
        repeat = 1 if args.quick else 5
        print('(as safemanip audit runs it from here on: per-frame fields left in the result files)')
        _, medians = audit_lines(inputs, cfg, tmp, [('local', 1, 'again, warm'), ('local', 2, '')], n, t_read,
                                 repeat)
        warm_s = medians['local', 1]
        print(f'2 workers: {warm_s / medians["local", 2]:.2f}x one warm worker; {machine_line(best_of)}')
        report_time(results, tmp / 'report', 100 if args.quick else 1000)
        fixed_costs(inputs, warm_s, tmp, 20 if args.quick else 200, 1 if args.quick else 3)
        raw_throughput(args.raw_bags or tmp / 'raw', 1 if args.quick else 12, tmp / 'raw_audit', best_of)
        if args.quick:
            fleet_scaling(tmp / 'fleet', cfg, 1, 2, 1, ray_too=False)
        else:      # last: Ray's processes outlive ray.shutdown() for a while
            import ray
            t = time.perf_counter()
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            # Each Ray worker is a fresh process that imports the package, builds the suite and faults
            # its buffers in once, as a fleet audit's workers do in their first of many chunks.
            run_audit(inputs, cfg, tmp / 'ray-warm', workers=2, engine='ray')
            print(f'\n## Predicate bags on Ray (a local cluster of 2 CPUs, started and its workers warmed in '
                  f'{time.perf_counter() - t:.1f} s, not counted)')
            _, medians = audit_lines(inputs, cfg, tmp / 'ray', [('ray', 2, ''), ('local', 1, 'warm')], n, t_read, 5)
            print(f'Ray, 2 workers: {medians["local", 1] / medians["ray", 2]:.2f}x one warm local worker; '
                  f'{machine_line(best_of)}')
            fleet_scaling(tmp / 'fleet', cfg, 2, 16, 3, ray_too=True)
            ray.shutdown()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


_COLD_AUDIT = """
import sys, time
t = time.perf_counter()
from safemanip_ros.audit.engine import AuditConfig, run_audit
t_import = time.perf_counter() - t
cfg = AuditConfig((sys.argv[1],), sys.argv[2], '', (), 20.0, 0.25, '', 'any')
t = time.perf_counter()
run_audit(sys.argv[4:], cfg, sys.argv[3])
print(t_import, time.perf_counter() - t)
"""


def fixed_costs(inputs: list[str], warm_s: float, tmp: Path, traces: int, fresh_runs: int = 3) -> None:
    """What one audit process pays once, each beside its baseline in this
    run: importing the audit engine beside importing numpy alone, in fresh
    interpreters; the first audit of the predicate bags in a fresh process
    beside the warm audit above; reading .jsonl traces into the monitor's
    matrices beside ``json.loads`` of the same lines."""
    import subprocess

    def fresh(code: str, *argv: str) -> list[float]:
        proc = subprocess.run([sys.executable, '-c', code, *argv], capture_output=True, text=True, check=True,
                              cwd=REPO)
        return [float(x) for x in proc.stdout.split()]

    numpy_s = min(fresh('import time; t = time.perf_counter(); import numpy; print(time.perf_counter() - t)')[0]
                  for _ in range(fresh_runs))
    cold = [fresh(_COLD_AUDIT, SUITE, SCENE, str(tmp / f'cold{k}'), *inputs) for k in range(fresh_runs)]
    import_s, first_s = min(c[0] for c in cold), min(c[1] for c in cold)
    print(f'\n## Fixed costs of one audit process (best of {fresh_runs} fresh interpreters)')
    print(f'import of the audit engine {import_s:.2f} s; of numpy alone {numpy_s:.2f} s '
          f'({import_s / numpy_s:.1f}x)')
    print(f'first audit of the predicate bags in a fresh process (suite built, layouts parsed) {first_s:.2f} s; '
          f'the warm audit above '
          f'{warm_s:.2f} s ({first_s / warm_s:.2f}x)')
    trace_line(tmp / 'traces', traces)


def trace_line(root: Path, traces: int, frames: int = 300) -> None:
    """.jsonl traces (a step list per line, 57 kitchen predicates, ~20 % true)
    read into the monitor's matrices (as the audit reads them), beside the
    one trace reader's frame by frame path (``read_traces`` then
    ``trace_matrix``: what the audit did before) and ``json.loads`` of the
    same lines one by one."""
    import json

    from safemanip_ros.audit.rollouts import read_jsonl
    from safemanip_ros.ltlf.trace import read_traces
    from safemanip_ros.monitor.frames import trace_matrix
    predicates = build_monitor([SUITE], scene=SCENE).predicates
    rng = np.random.default_rng(1)
    root.mkdir(parents=True)
    files = []
    for k in range(traces):
        state = rng.random(len(predicates)) < 0.2
        lines = []
        for _ in range(frames):
            state ^= rng.random(len(predicates)) < 0.03
            lines.append(json.dumps([p for p, v in zip(predicates, state) if v]))
        files.append(root / f'run{k:04d}.jsonl')
        files[-1].write_text('\n'.join(lines) + '\n')
    ours = frame_by_frame = bare = float('inf')
    names = list(predicates)
    for _ in range(3):          # best of 3, interleaved
        t = time.perf_counter()
        for f in files:
            read_jsonl(f, names)
        ours = min(ours, time.perf_counter() - t)
        t = time.perf_counter()
        for f in files:
            [trace] = read_traces(f, names)
            trace_matrix(trace, names)
        frame_by_frame = min(frame_by_frame, time.perf_counter() - t)
        t = time.perf_counter()
        for f in files:
            [json.loads(line) for line in f.read_text().splitlines()]
        bare = min(bare, time.perf_counter() - t)
    print(f'.jsonl traces ({traces} x {frames} frames) to the monitor\'s matrices: {ours / traces * 1e3:.2f} ms per '
          f'trace; frame by frame (read_traces + trace_matrix, the path before) {frame_by_frame / traces * 1e3:.2f} ms '
          f'({frame_by_frame / ours:.1f}x); json.loads of the same lines one by one alone {bare / traces * 1e3:.2f} ms '
          f'({ours / bare:.2f}x of it)')


def _python_work(_: int) -> float:
    t = time.perf_counter()
    s = 0
    for i in range(3_000_000):
        s += i * i
    return time.perf_counter() - t


def _streaming_work(_: int) -> float:
    a = np.random.default_rng(0).random(2_000_000)      # 16 MB: past the caches, as a chunk's columns are
    t = time.perf_counter()
    for _ in range(40):
        (a * 1.0001).sum()
    return time.perf_counter() - t


def _forked_map(work: Callable[[Any], float], jobs: list[Any]) -> list[float]:
    """``work`` over ``jobs``, one forked process each, all at once.  The
    processes are joined, not terminated (``Pool.__exit__`` sends SIGTERM,
    which a process forked after ``ray.init`` answers with a stack dump)."""
    pool = get_context('fork').Pool(len(jobs))
    try:
        return pool.map(work, jobs)
    finally:
        pool.close()
        pool.join()


def machine_line(best_of: int) -> str:
    """This machine's throughput with 2 processes at once against 1 (forked,
    as the audit's workers; best of ``best_of`` each), for pure-Python work and for
    memory-streaming numpy work: the ceiling of an audit's 2 workers, measured
    now (the machine's speed moves from minute to minute)."""
    parts = []
    for label, work in (('pure Python', _python_work), ('memory-streaming numpy', _streaming_work)):
        one = two = float('inf')
        for _ in range(best_of):
            one = min(one, _forked_map(work, [0])[0])
            two = min(two, max(_forked_map(work, [0, 1])))
        parts.append(f'{label} {2 * one / two:.2f}x')
    return f'this machine, 2 processes against 1, now: {", ".join(parts)}'


def audit_line(inputs: list[str], cfg, tmp: Path, engine: str, workers: int, n: int, t_read: float,
               note: str = '', tag: str = '') -> tuple[list[dict], float]:
    """One timed audit of the predicate bags; prints its line, returns the results and its seconds."""
    t = time.perf_counter()
    results, _ = run_audit(inputs, cfg, tmp / f'out-{engine}{workers}{tag}', workers=workers, engine=engine)
    dt = time.perf_counter() - t
    _print_audit_line(engine, workers, note, dt, n, t_read)
    return results, dt


def audit_lines(inputs: list[str], cfg, tmp: Path, runs: list[tuple[str, int, str]], n: int, t_read: float,
                repeat: int) -> tuple[list[dict], dict[tuple[str, int], float]]:
    """``repeat`` interleaved timed audits of the predicate bags for each
    (engine, workers, note) of ``runs``, as ``safemanip audit`` runs them
    (results detached from their per-frame fields); prints each one's median
    (range), returns the last results and the medians."""
    times: dict[tuple[str, int], list[float]] = {(engine, workers): [] for engine, workers, _ in runs}
    results: list[dict] = []
    for rep in range(repeat):
        for engine, workers, _ in runs:
            t = time.perf_counter()
            results, _ = run_audit(inputs, cfg, tmp / f'out-{engine}{workers}-{rep}', workers=workers, engine=engine,
                                   detach_timelines=True)
            times[engine, workers].append(time.perf_counter() - t)
    for engine, workers, note in runs:
        spread = times[engine, workers]
        over = f'median of {repeat} interleaved runs, {min(spread):.2f}-{max(spread):.2f} s' if repeat > 1 else ''
        _print_audit_line(engine, workers, '; '.join(part for part in (note, over) if part), statistics.median(spread),
                          n, t_read)
    return results, {key: statistics.median(v) for key, v in times.items()}


def _print_audit_line(engine: str, workers: int, note: str, dt: float, n: int, t_read: float) -> None:
    print(f'audit, {engine} engine, {workers} worker(s){f" ({note})" if note else ""}: {dt:.2f} s '
          f'({n / dt:,.0f} frames/s, '
          f'{n / dt / workers:,.0f} per worker), {t_read / dt:.1f}x rosbags\' bare rate (targets: >= 30,000 '
          f'frames/s per core, >= 10x; near-linear in workers)')


def report_time(results: list[dict], out: Path, rollouts: int) -> None:
    """build_report + report.json + CSVs + report.html for ``rollouts``
    rollouts (the audit's sources repeated under new names), as ``safemanip
    audit`` makes them: from detached results (per-frame fields left in the
    result files, read back while writing), with the timelines the audit's
    workers drew; beside the same from results that carry their fields in
    memory (the baseline), and beside drawing every timeline here.  Also the
    memory the results hold, detached beside carried."""
    import copy
    import json
    import tracemalloc

    from safemanip_ros.audit import report as rp
    from safemanip_ros.audit.engine import _store_result
    from safemanip_ros.audit.gate import evaluate_gate
    from safemanip_ros.audit.stored import detached
    many: list[dict] = []
    k = 0
    while sum(len(r['episodes']) for r in many) < rollouts:
        for r in results:
            r2 = copy.deepcopy(r)
            r2['source'] = f'{r["source"]}#{k}'
            for e in r2['episodes']:
                e['source'] = r2['source']
            many.append(r2)
            k += 1
    n = sum(len(r['episodes']) for r in many)
    files = [_store_result(out / 'results', f'r{i:05d}', 'bench', r) for i, r in enumerate(many)]
    # What a resumed audit holds for its report: each stored result read back, carried or detached.
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    held = [json.loads(f.read_text()) for f in files]
    carried_mb = (tracemalloc.get_traced_memory()[0] - before) / 1e6
    held = [detached(h, f, h.pop('key')) for h, f in zip(held, files)]
    detached_mb = (tracemalloc.get_traced_memory()[0] - before) / 1e6
    tracemalloc.stop()
    del held
    print(f'results held for the report of {n} rollouts: {detached_mb:.0f} MB detached (safemanip audit), '
          f'{carried_mb:.0f} MB carrying their per-frame fields (the baseline; {carried_mb / detached_mb:.1f}x)')
    light = [detached(r, f, 'bench') for r, f in zip(many, files)]
    import matplotlib.figure  # noqa: F401  imported once before timing, not inside the first report
    rp.build_report(many, [], {'reduction': 'any'})     # untimed: scipy's import, the bootstrap's draw for n
    timed: dict[str, tuple[float, float, float]] = {}
    for how, res in (('detached', light), ('carried', many)):
        where = out / how
        where.mkdir(parents=True)
        t = time.perf_counter()
        predrawn = rp.predrawn_timelines(res)
        report = rp.build_report(res, [], {'reduction': 'any'})
        t_json = time.perf_counter()
        rp.write_report_json(report, where / 'report.json')
        t_json = time.perf_counter() - t_json
        rp.write_csvs(report, where)
        t_stats = time.perf_counter() - t
        t = time.perf_counter()
        rp.write_html(report, where, 'violations', predrawn)
        timed[how] = (t_stats, t_json, time.perf_counter() - t)
    assert (out / 'detached' / 'report.json').read_bytes() == (out / 'carried' / 'report.json').read_bytes()
    t = time.perf_counter()
    json.dumps(report, indent=1)            # the writer before report_json: json's Python encoder
    t_indent = time.perf_counter() - t
    (stats_d, json_d, html_d), (stats_c, json_c, html_c) = timed['detached'], timed['carried']
    drawn = sum(1 for e in report['episodes'] if e['timeline'])
    print(f'report for {n} rollouts (detached, as safemanip audit): statistics + JSON + CSV {stats_d:.2f} s; '
          f'report.html with {drawn} timelines drawn by the audit\'s workers {html_d:.2f} s '
          f'(target < 30 s in all); from results in memory (the baseline): {stats_c:.2f} s and {html_c:.2f} s')
    print(f'report.json for {n} rollouts: {json_c:.2f} s from results in memory ({json_d:.2f} s detached); '
          f'json.dumps(indent=1) of the same report {t_indent:.2f} s ({t_indent / json_c:.1f}x)')
    rp.report_json(report)     # the string form (the API's) agrees with the file written above
    t = time.perf_counter()
    rp.write_html(report, out / 'carried', 'all', {})
    print(f'report.html for {n} rollouts with every timeline drawn here: {time.perf_counter() - t:.2f} s, '
          f'{(out / "carried" / "report.html").stat().st_size / 1e6:.1f} MB')
    # The gate against a baseline, both reports read as safemanip gate reads them (without their
    # rollout entries), beside reading them whole (what the gate did before); the same rows either way.
    path = out / 'detached' / 'report.json'
    timed_gate = {}
    for how, episodes in (('without rollout entries', False), ('whole', True)):
        t = time.perf_counter()
        cand, base = rp.read_report(path, episodes=episodes), rp.read_report(path, episodes=episodes)
        rows = evaluate_gate(cand, {c: 1.0 for c in cand['categories']}, base)
        timed_gate[how] = (time.perf_counter() - t, rows)
    assert timed_gate['whole'][1] == timed_gate['without rollout entries'][1]
    light_s, whole_s = timed_gate['without rollout entries'][0], timed_gate['whole'][0]
    print(f'gate with a baseline over the report of {n} rollouts ({path.stat().st_size / 1e6:.0f} MB): {light_s:.2f} s '
          f'reading the reports without their rollout entries (safemanip gate); {whole_s:.2f} s reading them whole (the '
          f'baseline; {whole_s / light_s:.1f}x)')

if __name__ == '__main__':
    sys.exit(main())
