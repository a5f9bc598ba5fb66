"""LTLf engine benchmarks: our compiler and runtimes beside SafeManip's
toolchain (ltlf2dfa + MONA, and per-frame ``eval`` of DOT edge guards), in
one run, with ratios.  Prints figures only; nothing here is a pass/fail test.

    python bench/bench_ltlf.py            # full (several minutes)
    python bench/bench_ltlf.py --quick    # small sizes, seconds

Baselines:
* ``mona``: ``ltlf2dfa ... to_dfa(mona_dfa_out=True)`` — formula translation
  plus the MONA binary, raw automaton out (ltlf2dfa's fast path);
* ``ltlf2dfa``: plain ``to_dfa()`` (what SafeManip called: MONA plus sympy
  post-processing into DOT);
* ``eval``: SafeManip's runtime — each frame, Python ``eval`` of the guard
  expressions on the current state's edges.

Our compiles (and the symbolic baseline's) run each in a fresh process set up
as ``safemanip compile`` sets itself up: freed memory kept
(:func:`safemanip_ros.memory.keep_freed_memory`).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from eval_baseline import EVAL_GLOBALS, guard_edges  # noqa: E402

from safemanip_ros.ltlf import compile_formula, parse  # noqa: E402
from safemanip_ros.ltlf.runtime import DFABank, StepTable  # noqa: E402
from safemanip_ros.memory import keep_freed_memory  # noqa: E402


def reach_avoid(n: int) -> str:
    inner = f'(!a{n} U b{n})'
    for i in range(n - 1, 0, -1):
        inner = f'(!a{i} U (b{i} & {inner}))'
    return inner


def responses(n: int) -> str:
    return ' & '.join(f'G(p{i} -> F q{i})' for i in range(1, n + 1))


def bounded_response(k: int) -> str:
    return f'G(a -> F[0,{k}] b)'


def bounded_absence(k: int) -> str:
    return f'G(a -> G[0,{k}] !c)'


def bounded_nested(k: int) -> str:
    return f'G(a -> F[0,{k}] (b & F[0,{k}] c))'


def formulas_of(name: str) -> list[str]:
    path = REPO / 'test' / 'data' / name
    return [ln.strip() for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith('#')]


def _timed(fn, *args, repeat: int = 1):
    """(median seconds over ``repeat`` runs, last result); short runs on these
    shared machines are noisy, so throughput figures use the median of 5."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn(*args)
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def _mona_time(text: str) -> float:
    from safemanip_ros.ltlf.reference import mona_dfa
    return _timed(mona_dfa, parse(text))[0]


def _ltlf2dfa_full_time(text: str) -> float:
    from ltlf2dfa.parser.ltlf import LTLfParser

    from safemanip_ros.ltlf.reference import to_ltlf2dfa
    t = time.perf_counter()
    LTLfParser()(to_ltlf2dfa(parse(text))).to_dfa()
    return time.perf_counter() - t


def _warm_reference() -> None:
    # Build ltlf2dfa's parser once so timings exclude its grammar set-up.
    from safemanip_ros.ltlf.reference import mona_dfa
    mona_dfa(parse('a U b'))


def _child(kind: str, text: str, q) -> None:
    """Runs in a fresh (spawned) interpreter: time one compile, report peak RSS."""
    try:
        if kind != 'ours':
            _warm_reference()
        if kind in ('ours', 'symbolic', 'explicit'):
            keep_freed_memory()     # as safemanip compile does
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        t = time.perf_counter()
        states = None
        if kind in ('ours', 'symbolic', 'explicit'):
            states = compile_formula(text, 'auto' if kind == 'ours' else kind).num_states
        elif kind == 'mona':
            _mona_time(text)
        else:
            _ltlf2dfa_full_time(text)
        dt = time.perf_counter() - t
        q.put((dt, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, rss0, states))
    except Exception as err:  # reported, not raised: a baseline may fail
        q.put(('error', str(err)[:200]))


def _in_subprocess(kind: str, text: str, timeout_s: float):
    """(seconds, peak RSS MiB, RSS MiB before compiling, states) from a fresh
    process, or None on timeout/failure."""
    ctx = mp.get_context('spawn')
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(kind, text, q))
    p.start()
    p.join(timeout_s)
    if p.is_alive():
        p.kill()
        p.join()
        return None
    out = q.get() if not q.empty() else None
    return None if out is None or out[0] == 'error' else out


def fmt_ratio(base: float | None, ours: float) -> str:
    return '-' if base is None else f'{base / ours:8.1f}x'


def bench_suites() -> dict:
    print('\n## Compile: every SafeManip and SpecRLBench formula (target < 50 ms each)')
    print(f"{'suite':24s} {'n':>4s} {'ours max ms':>12s} {'ours med ms':>12s} {'mona med ms':>12s} {'ratio(med)':>10s}")
    out = {}
    for name in ('safemanip_formulas.txt', 'specrlbench_finite.txt'):
        texts = formulas_of(name)
        ours = [compile_formula(t).compile_time_s for t in texts]
        mona = [_mona_time(t) for t in texts]
        med_o, med_m = statistics.median(ours), statistics.median(mona)
        print(f'{name:24s} {len(texts):4d} {max(ours) * 1e3:12.2f} {med_o * 1e3:12.2f} {med_m * 1e3:12.2f} '
              f'{fmt_ratio(med_m, med_o):>10s}')
        out[name] = {'n': len(texts), 'ours_max_ms': max(ours) * 1e3, 'ours_median_ms': med_o * 1e3,
                     'mona_median_ms': med_m * 1e3}
    return out


# Window families that the explicit construction compiles (beside the nested one above).
WINDOW_FAMILIES = {
    'independent_windows': lambda k: f'G(a -> F[0,{k}] b) & G(c -> F[0,{k}] d)',
    'delayed_window': lambda delay: f'G(a -> F[{delay},{delay + 20}] b)',
    'triple_nested': lambda k: f'G(a -> F[0,{k}] (b & F[0,{k}] (c & F[0,{k}] d)))',
}


_BASELINE_NAMES = {'symbolic': 'symbolic s', 'mona': 'mona s', 'full': 'ltlf2dfa s'}


def bench_family(title: str, make, sizes, timeout_s: float, baselines: dict[str, int], repeat: int = 1) -> list:
    """Our compile time for each size (compile_formula as it picks its
    construction; median and range over ``repeat`` fresh processes) beside
    each baseline run up to its size limit, in the same run: ``symbolic``
    (our compiler with construction='symbolic'), ``mona`` (ltlf2dfa + MONA,
    raw automaton) and ``full`` (ltlf2dfa's plain to_dfa)."""
    print(f'\n## Compile: {title}')
    head = f"{'n':>5s} {'states':>7s} {'ours s':>9s} {'range':>13s} {'peak MiB':>9s}"
    for kind in baselines:
        head += f' {_BASELINE_NAMES[kind]:>11s} {"ratio":>9s}'
    print(head)
    rows = []
    for n in sizes:
        text = make(n)
        runs = [_in_subprocess('ours', text, timeout_s) for _ in range(repeat)]
        if any(r is None for r in runs):
            print(f'{n:5d} our compiler failed or timed out after {timeout_s} s')
            continue
        times = sorted(r[0] for r in runs)
        ours_s, ours_mib, states = statistics.median(times), max(r[1] for r in runs), runs[0][3]
        line = f'{n:5d} {states:7d} {ours_s:9.3f} {times[0]:6.3f}-{times[-1]:<6.3f} {ours_mib:9.0f}'
        row = {'n': n, 'states': states, 'ours_s': ours_s, 'ours_runs_s': times, 'ours_peak_mib': ours_mib}
        for kind, max_n in baselines.items():
            base = _in_subprocess(kind, text, timeout_s) if n <= max_n else None
            base_s = base[0] if base else None
            line += f" {('-' if base_s is None else f'{base_s:11.3f}'):>11s} {fmt_ratio(base_s, ours_s):>9s}"
            row[f'{kind}_s'] = base_s
        print(line)
        rows.append(row)
    print('   (ours: the construction compile_formula picks, in a fresh process set up as safemanip compile '
          'sets itself up; -: not run at that size, or timed out)')
    return rows


def _eval_baseline(dfa, frames: list[dict[str, bool]]) -> tuple[float, list[int]]:
    """SafeManip's runtime: per frame, eval each outgoing edge guard of the state."""
    edges = guard_edges(dfa)
    state = dfa.initial
    out = []
    t = time.perf_counter()
    for frame in frames:
        for code, target in edges[state]:
            if eval(code, EVAL_GLOBALS, frame):
                state = target
                break
        out.append(state)
    return time.perf_counter() - t, out


def bench_stepping(trace_len: int, bank_size: int, bank_frames: int) -> dict:
    print('\n## Stepping')
    rng = np.random.default_rng(7)
    # SafeManip's grasp-stability formula over the scripted rollout's predicates.
    text = 'G(object_grasped_raw_mug -> ((object_sync_mug U object_left_gripper_mug) | G(object_sync_mug)))'
    dfa = compile_formula(text)
    table = StepTable.from_dfa(dfa)
    k = len(dfa.atoms)
    # A realistic predicate stream that never violates (SafeManip's eval
    # baseline would otherwise sit in the trivial sink): the scripted nominal
    # pick-and-place rollout, repeated.
    from safemanip_ros.sim.scripted import pick_and_place
    nominal = pick_and_place('none').frames
    one = np.array([sum(int(fr[a]) << j for j, a in enumerate(dfa.atoms)) for fr in nominal], dtype=np.int64)
    letters = np.tile(one, -(-trace_len // one.size))[:trace_len]
    table.run(letters[:10000])
    t_ours, states = _timed(table.run, letters, repeat=5)
    noise = rng.integers(0, 1 << k, size=trace_len)
    t_noise, _ = _timed(table.run, noise, repeat=5)
    n_base = min(trace_len, 50_000)
    frames = [{a: bool((int(x) >> j) & 1) for j, a in enumerate(dfa.atoms)} for x in letters[:n_base]]
    t_base, base_states = _eval_baseline(dfa, frames)
    assert base_states == states[:n_base].tolist()
    ours_rate, base_rate = trace_len / t_ours, n_base / t_base
    print(f'one DFA, {trace_len:,} steps (nominal rollouts, median of 5): {ours_rate / 1e6:8.1f} M steps/s   '
          f'eval baseline {base_rate / 1e6:6.3f} M steps/s   ratio {ours_rate / base_rate:7.1f}x   (target >= 5 M)')
    print(f'one DFA, {trace_len:,} steps (i.i.d. noise): {trace_len / t_noise / 1e6:7.1f} M steps/s')

    pool = formulas_of('safemanip_formulas.txt') + formulas_of('specrlbench_finite.txt')
    dfas = [compile_formula(pool[i % len(pool)]) for i in range(bank_size)]
    preds = sorted({a for d in dfas for a in d.atoms})
    bank = DFABank(dfas, preds)
    frames_m = rng.random((bank_frames, len(preds))) < 0.2
    bank.run(frames_m[:10])
    t_bank, out = _timed(bank.run, frames_m, repeat=5)
    bank_rate = bank_size * bank_frames / t_bank
    # Baseline: the same DFAs stepped one by one with DFA.step (no eval, already faster than SafeManip's).
    cols = [[preds.index(a) for a in d.atoms] for d in dfas]
    sub = min(bank_frames, 50)
    t = time.perf_counter()
    cur = [d.initial for d in dfas]
    for f in range(sub):
        row = frames_m[f]
        for i, d in enumerate(dfas):
            letter = 0
            for j, c in enumerate(cols[i]):
                if row[c]:
                    letter |= 1 << j
            cur[i] = d.step(cur[i], letter)
    t_loop = time.perf_counter() - t
    assert cur == out[sub - 1].tolist()
    loop_rate = bank_size * sub / t_loop
    print(f'bank {bank_size} DFAs x {bank_frames} frames (median of 5): {bank_rate / 1e6:8.1f} M property-steps/s   '
          f'per-DFA Python loop {loop_rate / 1e6:6.3f} M/s   ratio {bank_rate / loop_rate:7.1f}x   (target >= 50 M)')
    lat = []
    for f in range(min(bank_frames, 2000)):
        t = time.perf_counter()
        bank.step(frames_m[f])
        lat.append(time.perf_counter() - t)
    med = statistics.median(lat) * 1e6
    p99 = float(np.percentile(lat, 99)) * 1e6
    print(f'one live frame of the {bank_size}-DFA bank: median {med:6.1f} us, p99 {p99:6.1f} us   '
          f'per-DFA loop {t_loop / sub * 1e6:8.1f} us   ratio {t_loop / sub * 1e6 / med:6.1f}x   (target < 50 us)')
    return {'single_msteps_s': ours_rate / 1e6, 'single_noise_msteps_s': trace_len / t_noise / 1e6,
            'eval_baseline_msteps_s': base_rate / 1e6, 'bank_mprop_steps_s': bank_rate / 1e6,
            'bank_loop_mprop_steps_s': loop_rate / 1e6, 'frame_median_us': med, 'frame_p99_us': p99}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--quick', action='store_true', help='small sizes; finishes in seconds')
    ap.add_argument('--json', metavar='FILE', help='also write the figures as JSON')
    args = ap.parse_args()
    results: dict = {}
    _warm_reference()
    if args.quick:
        results['reach_avoid'] = bench_family('reach-avoid, n stages (2**n+1 states)', reach_avoid, range(1, 5),
                                              timeout_s=60, baselines={'mona': 3, 'full': 2})
        results['bounded_response'] = bench_family('G(a -> F[0,k] b), k+3 states', bounded_response,
                                                   (10, 100, 1000), timeout_s=60, baselines={'mona': 10, 'full': 0})
        results['windows_nested'] = bench_family('G(a -> F[0,k] (b & F[0,k] c)), ~k^3/6 states', bounded_nested,
                                                 (5, 30), timeout_s=60, baselines={'symbolic': 30, 'mona': 5})
        results['stepping'] = bench_stepping(20_000, 100, 100)
    else:
        results['suites'] = bench_suites()
        results['reach_avoid'] = bench_family('reach-avoid, n stages (2**n+1 states; targets n=7 < 1 s, '
                                              'n=10 < 30 s and < 2 GB)', reach_avoid, range(1, 11),
                                              timeout_s=180, baselines={'mona': 7, 'full': 4})
        results['responses'] = bench_family('conjunction of n responses G(p_i -> F q_i) (target n=8 < 1 s)',
                                            responses, range(1, 9), timeout_s=180, baselines={'mona': 8, 'full': 2})
        # Bounded windows (a 1 s window at 20 Hz is k = 20).  MONA, through
        # ltlf2dfa's expansion into nested X, is exponential in k here.
        results['bounded_response'] = bench_family(
            'G(a -> F[0,k] b), k+3 states (targets k=100 < 50 ms, k=1000 < 1 s)', bounded_response,
            (10, 12, 15, 20, 100, 1000), timeout_s=120, baselines={'mona': 15, 'full': 0})
        results['bounded_absence'] = bench_family(
            'G(a -> G[0,k] !c), k+3 states (targets k=100 < 50 ms, k=1000 < 1 s)', bounded_absence,
            (10, 12, 15, 20, 100, 1000), timeout_s=120, baselines={'mona': 15, 'full': 0})
        results['bounded_nested'] = bench_family(
            'G(a -> F[0,k] (b & F[0,k] c)), minimal DFA ~k^3/6 states (target k=100 < 1 s)', bounded_nested,
            (5, 10, 20, 50, 100), timeout_s=180, baselines={'symbolic': 50, 'mona': 10}, repeat=3)
        results['independent_windows'] = bench_family(
            'G(a -> F[0,k] b) & G(c -> F[0,k] d), two independent windows', WINDOW_FAMILIES['independent_windows'],
            (20, 50, 100), timeout_s=180, baselines={'symbolic': 100}, repeat=3)
        results['delayed_window'] = bench_family(
            'G(a -> F[l,l+20] b), a window that opens l frames later (~2^l states)', WINDOW_FAMILIES['delayed_window'],
            (5, 10, 12), timeout_s=180, baselines={'symbolic': 12, 'mona': 5}, repeat=3)
        results['triple_nested'] = bench_family(
            'G(a -> F[0,k] (b & F[0,k] (c & F[0,k] d))), three nested windows', WINDOW_FAMILIES['triple_nested'],
            (5, 10, 15), timeout_s=180, baselines={'symbolic': 10}, repeat=3)
        results['stepping'] = bench_stepping(1_000_000, 1000, 1000)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == '__main__':
    sys.exit(main())
