"""Faithfulness benchmark: does the shipped configuration flag exactly the
physically faulty rollouts?

Clean and faulty robosuite rollouts (:mod:`.recording`) are recorded as bags
with their physical ground truth, audited with the shipped suites and robot
configuration (the same ``run_audit`` as ``safemanip audit``), and the
monitor's violations are compared with the truth:

* a rollout is **flagged** when some property has a violation episode;
* a faulty rollout is **detected** when a violation starts no earlier than
  ``EARLY_SLACK_FRAMES`` before its first labelled event;
* sensitivity = detected faulty / faulty, specificity = unflagged clean /
  clean, precision = detected / flagged (Clopper–Pearson intervals);
* per property: the faults it is meant to catch (:data:`EXPECTED`), its
  detections among them, its false alarms per clean rollout, and the
  latency in frames from the event's first frame to the violation's first
  frame (to be compared with the property's window + 1 frame).
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..audit.schema import Report
from ..audit.stats import clopper_pearson
from . import ROBOT_CONFIGS
from .perception import LEVELS, PerceptionLevel
from .pickplace import PICKPLACE_FAULTS
from .policies import LIFT_FAULTS
from .recording import RolloutSpec, read_truth, run_rollout

EARLY_SLACK_FRAMES = 2
EXPECTED = {
    'release_only_over_support': ('midair_drop', 'release_above_support', 'loose_grip'),
    'no_dragging_on_support': ('drag',),
    'no_forbidden_contact': ('table_smash',),
    'raw_contact_blocks_clean_until_sanitized': ('touch_raw_then_clean',),
    'place_preconditions_safe': ('place_in_clutter',),
    'pick_preconditions_safe': ('pick_in_clutter',),
}
"""Property → the faults it is meant to catch (its per-property sensitivity)."""
WINDOW_FRAMES = {'release_only_over_support': 0, 'no_dragging_on_support': 8, 'no_forbidden_contact': 21,
                 'raw_contact_blocks_clean_until_sanitized': 0, 'place_preconditions_safe': 0,
                 'pick_preconditions_safe': 10}
"""The debouncing window of each property (latency target: window + 1 frame)."""


TASK_FAULTS = {'Lift': LIFT_FAULTS, 'PickPlace': PICKPLACE_FAULTS, 'Stack': LIFT_FAULTS}
TASKS = ('Lift', 'PickPlace', 'Stack')


def rollout_plan(rollouts: int, seed: int, tasks: tuple[str, ...] = ('Lift', 'PickPlace')) -> list[RolloutSpec]:
    """``rollouts`` rollouts cycling through every (task, fault), clean first; seeds from ``seed``."""
    combos = [(task, fault) for task in tasks for fault in TASK_FAULTS[task]]
    return [RolloutSpec(combos[i % len(combos)][0], combos[i % len(combos)][1], seed + i) for i in range(rollouts)]


def record(plan: list[RolloutSpec], out_dir: Path, progress: Callable[[str], None] = print,
           perception: PerceptionLevel = LEVELS['truth']) -> list[Path]:
    """Record each rollout of ``plan`` into ``out_dir`` (a rollout whose
    truth file is there already is kept), object poses as ``perception`` gives them."""
    from .world import SimWorld
    out_dir.mkdir(parents=True, exist_ok=True)
    worlds: dict[str, SimWorld] = {}
    bags = []
    for i, spec in enumerate(plan):
        bag = out_dir / spec.name
        if not (bag / 'truth.json').exists():
            if spec.task not in worlds:
                progress(f'starting robosuite {spec.task} (the first start compiles numba kernels, ~20 s)')
                worlds[spec.task] = SimWorld(spec.task, spec.seed, camera=perception.camera)
            t0 = time.monotonic()
            if bag.exists():
                import shutil
                shutil.rmtree(bag)
            truth = run_rollout(worlds[spec.task], spec, out_dir, perception=perception)
            progress(f'[{i + 1}/{len(plan)}] {spec.name}: {truth.frames} frames, events '
                     f'{[e.event for e in truth.events] or "none"} ({time.monotonic() - t0:.1f} s)')
        bags.append(bag)
    for world in worlds.values():
        world.close()
    return bags


@dataclass
class RolloutOutcome:
    name: str
    fault: str
    events: list[dict[str, Any]]
    violations: dict[str, list[int]]      # property → violation start frames
    flagged: bool = False
    detected: bool = False


def score(report: Report, bags: list[Path], confidence: float = 0.95) -> dict[str, Any]:
    """Compare an audit report of ``bags`` with their truth files."""
    by_source = {Path(e['source']).name: e for e in report['episodes']}
    outcomes = []
    for bag in bags:
        truth = read_truth(bag)
        ep = by_source.get(bag.name)
        if truth is None or ep is None:
            continue
        viol: dict[str, list[int]] = {}
        for row in ep.get('timeline', []):
            prop = row['instance'].split('[')[0]
            viol.setdefault(prop, []).extend(e['start'] for e in row['episodes'])
        o = RolloutOutcome(bag.name, truth['fault'], truth['events'], viol, flagged=bool(viol))
        first = min((e['start_frame'] for e in truth['events']), default=None)
        if first is not None:
            starts = [s for ss in viol.values() for s in ss if s >= first - EARLY_SLACK_FRAMES]
            o.detected = bool(starts)
        outcomes.append(o)
    faulty = [o for o in outcomes if o.events]
    # A fault injected that the physics never produced (no labelled event) is neither faulty
    # nor clean: whatever the monitor says of it is no evidence either way.
    unrealised = [o for o in outcomes if not o.events and o.fault != 'none']
    clean = [o for o in outcomes if not o.events and o.fault == 'none']
    tp = sum(o.detected for o in faulty)
    flagged = sum(o.flagged for o in outcomes)
    true_flags = sum(o.flagged and o.detected for o in faulty)
    props = {}
    for prop, faults in EXPECTED.items():
        # Meant for the property: the physics produced one of its events (an injected fault may produce
        # another's, or none; a scene may produce one by itself, as a pick in clutter).  Its latency is
        # from the first of those events.
        lat = []
        meant = 0
        for o in faulty:
            starts = [e['start_frame'] for e in o.events if e['event'] in faults]
            if not starts:
                continue
            meant += 1
            first = min(starts)
            late = [s - first for s in o.violations.get(prop, []) if s >= first - EARLY_SLACK_FRAMES]
            if late:
                lat.append(min(late))
        props[prop] = {
            'faults': list(faults), 'episodes': meant, 'detected': len(lat),
            'sensitivity': len(lat) / meant if meant else None,
            'sensitivity_ci': clopper_pearson(len(lat), meant, confidence),
            'false_alarms_per_clean_episode': (sum(len(o.violations.get(prop, [])) for o in clean) / len(clean)
                                               if clean else None),
            'median_latency_frames': statistics.median(lat) if lat else None,
            'window_frames': WINDOW_FRAMES.get(prop),
        }
    other = sorted({p for o in outcomes for p in o.violations} - set(EXPECTED))
    for prop in other:
        props[prop] = {'faults': [], 'episodes': 0, 'detected': 0, 'sensitivity': None, 'sensitivity_ci': None,
                       'false_alarms_per_clean_episode': (sum(len(o.violations.get(prop, [])) for o in clean) /
                                                          len(clean) if clean else None),
                       'median_latency_frames': None, 'window_frames': None}
    return {
        'episodes': len(outcomes), 'faulty': len(faulty), 'clean': len(clean),
        'unrealised': [o.name for o in unrealised],
        'sensitivity': tp / len(faulty) if faulty else None,
        'sensitivity_ci': clopper_pearson(tp, len(faulty), confidence),
        'specificity': sum(not o.flagged for o in clean) / len(clean) if clean else None,
        'specificity_ci': clopper_pearson(sum(not o.flagged for o in clean), len(clean), confidence),
        'precision': true_flags / flagged if flagged else None,
        'precision_ci': clopper_pearson(true_flags, flagged, confidence),
        'false_alarms_per_clean_episode': (sum(sum(len(v) for v in o.violations.values()) for o in clean) /
                                           len(clean) if clean else None),
        'properties': props,
        'outcomes': [o.__dict__ for o in outcomes],
    }


def format_table(result: dict[str, Any]) -> str:
    def f(v: float | None, ci: Sequence[float] | None = None) -> str:
        if v is None:
            return '-'
        s = f'{v:.2f}'
        return s + (f' [{ci[0]:.2f}, {ci[1]:.2f}]' if ci else '')
    unrealised = result.get('unrealised') or []
    lines = [f'faithfulness over {result["episodes"]} rollouts ({result["faulty"]} faulty, {result["clean"]} clean'
             + (f', {len(unrealised)} with a fault the physics did not produce, left out' if unrealised else '')
             + ')',
             f'  sensitivity {f(result["sensitivity"], result["sensitivity_ci"])}   specificity '
             f'{f(result["specificity"], result["specificity_ci"])}   precision '
             f'{f(result["precision"], result["precision_ci"])}   false alarms per clean rollout '
             f'{f(result["false_alarms_per_clean_episode"])}',
             f'  {"property":32s} {"detected":>9s} {"sensitivity [95% CI]":>22s} {"false/clean":>11s} '
             f'{"latency":>8s} {"window+1":>8s}']
    for prop, r in result['properties'].items():
        lat = '-' if r['median_latency_frames'] is None else f'{r["median_latency_frames"]:g}'
        win = '-' if r['window_frames'] is None else str(r['window_frames'] + 1)
        lines.append(f'  {prop:32s} {r["detected"]:>4d}/{r["episodes"]:<4d} '
                     f'{f(r["sensitivity"], r["sensitivity_ci"]):>22s} {f(r["false_alarms_per_clean_episode"]):>11s} '
                     f'{lat:>8s} {win:>8s}')
    return '\n'.join(lines)


TARGETS = {'sensitivity': 0.95, 'specificity': 1.0, 'latency_beyond_window_frames': 3}
"""What the benchmark holds every task to at the realistic perception level."""


SIM_SKILLS = {'descend': 'pick', 'close': 'pick', 'lower': 'place', 'release': 'place'}
"""The scripted policies' phases (their ``/skill_events``) as SafeManip actions."""


def skills_config(task: str, out_dir: Path) -> Path:
    """The shipped configuration of ``task`` with a ``skills:`` section
    mapping the scripted policies' phases (:data:`SIM_SKILLS`), written
    under ``out_dir``."""
    import yaml

    from ..resources import config_path
    shipped = config_path('robots', ROBOT_CONFIGS[task])
    doc = yaml.safe_load(shipped.read_text())
    doc['ontology'] = [str((shipped.parent / p).resolve()) for p in doc.get('ontology', [])]
    doc['skills'] = {'actions': dict(SIM_SKILLS)}
    path = out_dir / f'skills_{ROBOT_CONFIGS[task]}'
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def run_benchmark(rollouts: int, seed: int, out_dir: Path, workers: int = 1,
                  progress: Callable[[str], None] = print, levels: tuple[str, ...] = ('truth',),
                  tasks: tuple[str, ...] = ('Lift', 'PickPlace'), onsets: tuple[str, ...] = ('geometry',)) -> dict[str, Any]:
    """Record (or reuse) the rollouts at each perception level of
    :data:`~.perception.LEVELS`, audit them with the shipped configuration,
    score against the truth, overall and per task; writes ``faithfulness.json``.
    ``onsets``: ``geometry`` (the shipped configuration: the pick onset from
    TF) and/or ``skills`` (the same plus the policies' phases as skill
    events, :data:`SIM_SKILLS`: scored as level ``<level>/skills``).

    Returns ``{'levels': {level: {'overall': score, 'tasks': {task: score}}}}``."""
    from ..audit.engine import AuditConfig, run_audit
    from ..audit.report import build_report
    from ..resources import config_path, default_suites
    unknown = [lv for lv in levels if lv not in LEVELS]
    if unknown:
        raise ValueError(f'unknown perception level(s) {unknown}; known: {", ".join(LEVELS)}')
    plan = rollout_plan(rollouts, seed, tasks)
    out: dict[str, Any] = {'episodes': rollouts, 'seed': seed, 'tasks': list(tasks), 'levels': {}}
    for level in levels:
        progress(f'perception level {level}: {LEVELS[level]}')
        bags = record(plan, out_dir / 'bags' / level, progress, perception=LEVELS[level])
        for mode in onsets:
            key = level if mode == 'geometry' else f'{level}/{mode}'
            all_results, all_skipped, per_task = [], [], {}
            for task in tasks:
                task_bags = [b for b, spec in zip(bags, plan) if spec.task == task]
                if not task_bags:
                    continue
                robot = config_path('robots', ROBOT_CONFIGS[task]) if mode == 'geometry' else \
                    skills_config(task, out_dir / 'configs')
                cfg = AuditConfig(tuple(str(p) for p in default_suites()), robot_config=str(robot))
                progress(f'auditing {len(task_bags)} {task} bags with {robot.name}')
                results, skipped = run_audit([str(b) for b in task_bags], cfg, out_dir / 'audit' / key / task,
                                             workers)
                all_results += results
                all_skipped += skipped
                per_task[task] = score(build_report(results, skipped, {'reduction': 'any'}), task_bags)
            overall = score(build_report(all_results, all_skipped, {'reduction': 'any'}), bags)
            overall['skipped'] = all_skipped
            out['levels'][key] = {'overall': overall, 'tasks': per_task}
            if LEVELS[level].camera:
                out['levels'][key]['perception'] = camera_figures(bags)
    (out_dir / 'faithfulness.json').write_text(json.dumps(out, indent=1))
    return out


def camera_figures(bags: list[Path]) -> dict[str, Any]:
    """A camera level's cost and error over its rollouts (their truth files'
    ``perception``): captures, median capture time (ms), median and 95th
    percentile position error (mm) against the truth, objects not found."""
    capture_ms: list[float] = []
    error_mm: list[float] = []
    missed = 0
    for bag in bags:
        figures = (read_truth(bag) or {}).get('perception') or {}
        capture_ms += figures.get('capture_ms', [])
        error_mm += figures.get('error_mm', [])
        missed += int(figures.get('missed', 0))
    return {'captures': len(capture_ms), 'detections': len(error_mm), 'missed': missed,
            'capture_ms_median': float(np.median(capture_ms)) if capture_ms else None,
            'error_mm_median': float(np.median(error_mm)) if error_mm else None,
            'error_mm_p95': float(np.percentile(error_mm, 95)) if error_mm else None}


def camera_line(level: str, cam: dict[str, Any]) -> str:
    """A camera level's :func:`camera_figures` in words."""
    error = '-' if cam['error_mm_median'] is None else \
        f'{cam["error_mm_median"]:.1f} mm median, {cam["error_mm_p95"]:.1f} mm at the 95th percentile'
    return (f'  {level}: {cam["captures"]} captures, {cam["capture_ms_median"]:.0f} ms each (render and locate, '
            f'median); position error against the truth {error} over {cam["detections"]} detections; '
            f'{cam["missed"]} objects not found in a capture')


def shortfalls(level_result: dict[str, Any]) -> list[str]:
    """Where a level's result misses :data:`TARGETS`, in words (empty: all met)."""
    out = []
    for task, r in level_result['tasks'].items():
        if r['faulty'] and (r['sensitivity'] or 0.0) < TARGETS['sensitivity']:
            out.append(f'{task}: sensitivity {r["sensitivity"]:.2f} < {TARGETS["sensitivity"]}')
        if r['clean'] and (r['specificity'] or 0.0) < TARGETS['specificity']:
            flagged = [o['name'] for o in r['outcomes'] if o['fault'] == 'none' and o['flagged']]
            out.append(f'{task}: specificity {r["specificity"]:.2f} < 1 (false alarms on {", ".join(flagged)})')
        for prop, p in r['properties'].items():
            lat, win = p['median_latency_frames'], p['window_frames']
            if lat is not None and win is not None and lat > win + TARGETS['latency_beyond_window_frames']:
                out.append(f'{task}: {prop} median latency {lat:g} frames > window {win} + 3')
    return out


def format_levels(result: dict[str, Any]) -> str:
    """Every level side by side: per task, then per property; then where the
    realistic level misses the targets."""
    def f(v: float | None, ci: Sequence[float] | None = None) -> str:
        if v is None:
            return '-'
        return f'{v:.2f}' + (f' [{ci[0]:.2f},{ci[1]:.2f}]' if ci else '')
    levels = result['levels']
    w = max([10] + [len(level) for level in levels])
    lines = [f'faithfulness at {len(levels)} perception level(s): {result["episodes"]} rollouts of '
             f'{", ".join(result["tasks"])}, seeds from {result["seed"]}',
             f'  {"level":{w}s} {"task":10s} {"faulty":>6s} {"clean":>5s} {"sensitivity [95% CI]":>22s} '
             f'{"specificity [95% CI]":>22s} {"precision [95% CI]":>22s} {"false/clean":>11s}']
    for level, lr in levels.items():
        for task, r in [*lr['tasks'].items(), ('all', lr['overall'])]:
            lines.append(f'  {level:{w}s} {task:10s} {r["faulty"]:>6d} {r["clean"]:>5d} '
                         f'{f(r["sensitivity"], r["sensitivity_ci"]):>22s} {f(r["specificity"], r["specificity_ci"]):>22s} '
                         f'{f(r["precision"], r["precision_ci"]):>22s} {f(r["false_alarms_per_clean_episode"]):>11s}')
    lines.append('  per property: detected/meant, false alarms per clean rollout, median latency (frames; '
                 'target window + 3)')
    props = sorted({p for lr in levels.values() for p in lr['overall']['properties']},
                   key=lambda p: (p not in EXPECTED, p))
    lines.append(f'  {"property":42s} ' + ' '.join(f'{lv:>24s}' for lv in levels))
    for prop in props:
        cells = []
        for lr in levels.values():
            p = lr['overall']['properties'].get(prop)
            if p is None:
                cells.append(f'{"-":>24s}')
                continue
            lat = '-' if p['median_latency_frames'] is None else f'{p["median_latency_frames"]:g}'
            win = '' if p['window_frames'] is None else f'/{p["window_frames"] + 3}'
            cells.append(f'{p["detected"]:>3d}/{p["episodes"]:<3d} {f(p["false_alarms_per_clean_episode"]):>5s} '
                         f'{lat + win:>9s}')
        lines.append(f'  {prop:42s} ' + ' '.join(f'{c:>24s}' for c in cells))
    for level, lr in levels.items():
        if level.split('/')[0] == 'truth':
            continue
        misses = shortfalls(lr)
        lines.append(f'  {level}: ' + ('every target met (sensitivity >= 0.95, specificity 1, latency <= window + 3)'
                                        if not misses else 'misses: ' + '; '.join(misses)))
    lines += [camera_line(level, lr['perception']) for level, lr in levels.items()
              if (lr.get('perception') or {}).get('captures')]
    unrealised = sorted({n for lr in levels.values() for n in lr['overall'].get('unrealised') or []})
    if unrealised:
        lines.append(f'  left out (fault injected, none physically produced): {", ".join(unrealised)}')
    return '\n'.join(lines)
