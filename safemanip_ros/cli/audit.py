"""``safemanip audit`` and ``safemanip gate``: offline safety audits of
recorded rollouts and the deployment gate over their reports."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from ..errors import SafemanipError
from ..resources import config_dir, default_suites
from .options import (
    add_foxglove_options,
    add_frame_options,
    add_profile,
    add_suite_options,
    check_frame_options,
    profile_properties,
)

if TYPE_CHECKING:
    from ..audit.engine import AuditConfig
    from ..audit.schema import Report, SourceResult

CONFIG = config_dir()
DEFAULT_SUITES = tuple(default_suites())


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser('audit', help='audit recorded rollouts (rosbag2 bags, JSONL traces) into a safety report',
                       description='Replay bags (MCAP or SQLite3) holding predicate topics, monitor traces or '
                                   'SpecRLBench traces through the monitor and write report.json, CSV tables and '
                                   'report.html to --out.  Per-source results are kept in --out as they finish; '
                                   'a re-run resumes (only results whose inputs, configuration and options are '
                                   'unchanged are reused).  Unreadable inputs are reported and skipped.  Exit 0 '
                                   'with a report, 3 when no rollout could be audited, 2 on bad input.')
    p.add_argument('inputs', nargs='+', metavar='BAG_OR_DIR', help='bags, .jsonl traces or folders of them; '
                   'several arguments are compared as policies/checkpoints')
    p.add_argument('--config', metavar='ROBOT.yaml', help='robot/scene configuration (entities bind templates)')
    p.add_argument('--objects-from-images', action='store_true',
                   help='with --config: find the objects of its camera.objects again in the bags\' /image and '
                        '/depth (with /camera_info), as camera_grounding does live, instead of their recorded poses')
    add_suite_options(p, 'audit', scene='instead of --config; not with it', strict='with --config')
    add_profile(p)
    p.add_argument('--out', required=True, metavar='DIR',
                   help='where report.json, the CSVs, report.html and the per-source results go (a re-run resumes)')
    add_frame_options(p)
    p.add_argument('--success', metavar='PREDICATE', help='predicate meaning task success')
    p.add_argument('--allow-unknown-predicates', action='store_true',
                   help='ignore predicate names the suite does not know (names only properties --only left out '
                        'read are known; default: a JSONL trace with another is '
                        'skipped with an error naming file:line and the known names; a bag, with an error naming '
                        'bag and topic, when no grounding publishes that name or it is a near miss of a name the '
                        'suite reads and the bag never gives)')
    p.add_argument('--reduction', choices=('any', 'final'), default='any',
                   help='success if the predicate holds at any frame (lerobot-eval) or the final frame')
    p.add_argument('--workers', type=int, default=1, help='worker processes (default 1)')
    p.add_argument('--engine', choices=('local', 'ray'), default='local',
                   help='local worker processes (default) or a Ray cluster')
    p.add_argument('--ray-address', help='Ray cluster address (default: a local instance)')
    p.add_argument('--confidence', type=float, default=0.95, help='confidence level of every interval (default 0.95)')
    p.add_argument('--unknown-flag', type=float, default=0.05, metavar='SHARE',
                   help='flag a property when more than this share of its frames was decided by unknown_as '
                        '(default 0.05)')
    p.add_argument('--timelines', choices=('violations', 'all', 'none'), default='violations',
                   help='timelines in report.html: rollouts with violations (default), all, or none')
    p.add_argument('--quiet', action='store_true', help='no progress bar')
    p.add_argument('--max-rate', action='append', default=[], metavar='NAME=X',
                   help='draw, in report.html, the running anytime-valid bound of category or property NAME '
                        'against limit X over the rollouts (the test of gate --sequential); repeatable')
    p.add_argument('--alpha', type=float, default=0.05,
                   help='--max-rate: family-wise level of a wrong PASS and of a wrong FAIL (default 0.05)')
    p.add_argument('--unit', choices=['rollout', 'trigger'], default='trigger',
                   help='--max-rate: what one observation is (default: trigger)')
    p.add_argument('--foxglove-mcap', metavar='DIR',
                   help='also write, for each source with a violation, DIR/<source>.mcap: its verdicts, events '
                        'and 3D markers with the recording\'s TF, for Foxglove and the shipped layout')
    p.set_defaults(func=run_audit_cmd)

    g = sub.add_parser('gate', help='pass/fail a checkpoint on an audit report (exit 0 = pass)',
                       description='Exit 0 only when, for every --max-rate NAME=X, the upper confidence bound of '
                                   'the per-trigger violation rate of category or property NAME is below X, and '
                                   '(with --baseline) the candidate is not significantly worse.')
    g.add_argument('report', metavar='REPORT.json', nargs='?', help='the audit report to gate (not with --live)')
    g.add_argument('--max-rate', action='append', default=[], metavar='NAME=X',
                   help='the per-trigger violation rate of category or property NAME must be below X (repeatable)')
    g.add_argument('--baseline', metavar='OTHER.json',
                   help='the report of the policy deployed today: no rate may be worse than the baseline\'s')
    g.add_argument('--confidence', type=float, default=0.95, help='confidence of the upper bounds (default 0.95)')
    g.add_argument('--min-triggers', type=int, default=30, metavar='N',
                   help='a limited rate with fewer triggers fails: too little evidence (default 30)')
    g.add_argument('--sequential', action='store_true',
                   help='replay the rollouts in report order with an anytime-valid test per limit and say when '
                        'each would have decided (exit 0 pass, 1 fail, 4 undecided); docs/audit.md')
    g.add_argument('--unit', choices=['rollout', 'trigger'], default='trigger',
                   help='--sequential, --live: what one observation is (default: trigger)')
    g.add_argument('--alpha', type=float, default=0.05,
                   help='--sequential, --live: family-wise probability of a wrong PASS, and of a wrong FAIL (default 0.05)')
    g.add_argument('--live', action='store_true',
                   help='decide as the canary runs: count each rollout from the monitors\' final metrics over DDS '
                        '(no REPORT.json); exit 0 pass, 1 fail, 4 undecided when a budget ends')
    g.add_argument('--robot', action='append', default=[], metavar='NS',
                   help='--live: a robot namespace whose <NS>/metrics to count (repeat for a fleet; default: metrics)')
    g.add_argument('--state', metavar='FILE', help='--live: keep the gate\'s state here and continue from it')
    g.add_argument('--rebuild-from', action='append', default=[], metavar='BAG',
                   help='--live: count the final metrics recorded in BAG first (repeat for several)')
    g.add_argument('--alerts', metavar='YAML', help='--live: send each decision to the alert sinks of this file\'s '
                                                   'alerts: section (JSON lines, webhook; docs/nodes.md)')
    g.add_argument('--max-rollouts', type=int, default=0, metavar='N', help='--live: stop undecided after N rollouts')
    g.add_argument('--max-duration-s', type=float, default=0.0, metavar='S',
                   help='--live: stop undecided after S seconds')
    add_foxglove_options(g)
    g.set_defaults(func=run_gate_cmd)


NOTHING_AUDITED = 3
"""Exit code of ``audit`` when no rollout could be audited (every input
skipped, an empty folder, a mistyped path): no report is evidence of nothing."""


def run_audit_cmd(args: argparse.Namespace) -> int:
    from ..audit.engine import AuditConfig, run_audit, unsupported_instances
    from ..audit.report import build_report, predrawn_timelines, write_csvs, write_html, write_report_json
    from ..gc_pause import gc_paused
    from .options import check_probability, writable_folder

    check_frame_options(args)
    check_probability('--confidence', args.confidence)
    check_probability('--unknown-flag', args.unknown_flag)
    if args.workers < 1:
        raise SafemanipError(f'--workers {args.workers}: expected at least 1')
    from ..audit.gate import parse_limits
    limits = parse_limits(args.max_rate)
    check_sequential_limits(limits, args.alpha, '--max-rate')
    if args.scene and args.config:
        raise SafemanipError(f'--scene {args.scene} and --config {args.config}: the robot configuration\'s '
                             f'entities are its scene; give one of them')
    if args.objects_from_images and not args.config:
        raise SafemanipError('--objects-from-images needs --config ROBOT.yaml: its camera.objects say what to find')
    cfg = AuditConfig(tuple(str(Path(p).resolve()) for p in profile_properties(args)),
                      str(Path(args.scene).resolve()) if args.scene else '',
                      str(Path(args.config).resolve()) if args.config else '',
                      tuple(args.only or ()), args.rate_hz, args.staleness_s, args.success or '', args.reduction,
                      args.allow_unknown_predicates, args.strict, args.objects_from_images)
    out = writable_folder('--out', args.out)
    foxglove_dir = writable_folder('--foxglove-mcap', args.foxglove_mcap) if args.foxglove_mcap else None
    bar = None
    if not args.quiet:
        from tqdm import tqdm
        bar = tqdm(total=0, unit='source', desc='audit', file=sys.stderr)

    def progress(done: int, total: int) -> None:
        if bar is not None:
            bar.total = total
            bar.n = done
            bar.refresh()

    unsupported = unsupported_instances(cfg)     # before any work: --strict fails here
    for inst, missing in sorted(unsupported.items()):
        print(f'unsupported: {inst} not run: nothing in {args.config} grounds {", ".join(missing)}', file=sys.stderr)
    # Detached: per-frame timelines stay in the result files until the report reads them (a fleet's
    # would take GBs of memory), see audit/stored.py.
    notes: list[str] = []
    results, skipped = run_audit(list(args.inputs), cfg, out, args.workers, args.engine, args.ray_address, progress,
                                 detach_timelines=True, notes=notes)
    if bar is not None:
        bar.close()
    with gc_paused():       # the report's entries and the files read back are acyclic: no collector passes
        drawn = predrawn_timelines(results)
        report = build_report(results, skipped, asdict(cfg), args.confidence, unknown_flag=args.unknown_flag,
                              unsupported=unsupported)
        limit_error = None
        if limits:
            from ..audit.sequential import sequential_decisions
            # Known only now: the report names the properties and categories a limit may name.  A
            # wrong name still gets the report written (nothing lost), then the error.
            try:
                report['sequential'] = {'unit': args.unit, 'alpha': args.alpha, 'limits': [
                    lr.as_dict() for lr in sequential_decisions(report, limits, args.alpha, args.unit)]}
            except SafemanipError as exc:
                limit_error = exc
        write_report_json(report, out / 'report.json')
        write_csvs(report, out)
        if not args.quiet and args.timelines != 'none':
            print(f'writing report.html ({len(drawn)} timelines drawn by the audit)', file=sys.stderr)
        write_html(report, out, args.timelines, drawn)
    print(f'audited {report["rollouts"]} rollouts ({report["frames"]} frames) from {len(results)} sources; '
          f'{len(skipped)} skipped; report in {out / "report.html"}')
    if foxglove_dir is not None:
        _foxglove_files(results, cfg, foxglove_dir)
    for s in skipped:
        print(f'skipped: {s["reason"]}')
    for note in notes:
        print(f'note: {note}', file=sys.stderr)
    for w in sorted({w for e in report['episodes'] for w in e.get('warnings', [])}):
        print(f'warning: {w}', file=sys.stderr)
    if report['task_success'].get('warning'):
        print(f'warning: {report["task_success"]["warning"]}', file=sys.stderr)
    for name in report['unknown_flagged']:
        row = report['properties'][name]
        print(f'warning: {name}: {row["unknown_share"]:.0%} of its frames were decided by unknown_as '
              f'({row["unknown_frames"]} of {row["frames"]})', file=sys.stderr)
    if report['rollouts'] == 0:
        print(f'safemanip: nothing could be audited ({len(skipped)} inputs skipped)', file=sys.stderr)
        return NOTHING_AUDITED
    if limit_error is not None:
        raise SafemanipError(f'--max-rate: {limit_error.one_line()} (the report was written without its '
                             f'sequential section)')
    for row in report.get('sequential', {}).get('limits', []):
        after = '' if row['decision'] is None else \
            f' after {row["after_observations"]} {args.unit}s ({row["after_rollouts"]} rollouts)'
        print(f'sequential: {row["name"]} limit {row["limit"]:g}: {row["decision"] or "undecided"}{after}')
        print(f'  {row["summary"]}')
    return 0


def _foxglove_files(results: list[SourceResult], cfg: AuditConfig, folder: Path) -> None:
    """``--foxglove-mcap``: an MCAP file per source with a violation (:mod:`..foxglove.audited`), named as
    its result file; one that exists is left as it is (a re-run resumes)."""
    from ..audit.engine import source_name
    from ..foxglove.audited import audit_to_mcap
    from ..foxglove.view import StackView
    from ..grounding.config import load_robot_config
    robot = load_robot_config(cfg.robot_config) if cfg.robot_config else None
    violated = [r['source'] for r in results
                if any(inst['violations'] for ep in r['episodes'] for inst in ep['instances'])]
    written = 0
    for source in violated:
        target = folder / f'{source_name(Path(source))}.mcap'
        if target.exists():
            continue
        try:
            audit_to_mcap(Path(source), target, cfg, StackView.of_robot(robot))
            written += 1
        except SafemanipError as err:          # read once already: a bag changed since; the others go on
            target.unlink(missing_ok=True)
            print(f'foxglove: {source}: not written: {err.one_line()}', file=sys.stderr)
    print(f'foxglove: {written} MCAP files written to {folder} ({len(violated)} sources with a violation)')


def _load(path: str) -> Report:
    from ..audit.report import read_report
    return read_report(path, episodes=False)     # the gate reads no rollout entry


UNDECIDED_EXIT = 4


def _live_gate(limits: dict[str, float], args: argparse.Namespace) -> int:
    """``gate --live``: the gate node (nodes/gate_node.py) with these options as its parameters."""
    if args.report or args.baseline or args.sequential:
        raise SafemanipError('--live reads the monitors over DDS: it takes no REPORT.json, --baseline or --sequential')
    if not limits:
        raise SafemanipError('--live needs at least one --max-rate NAME=X')
    from ..ros_names import namespace_problem
    from .options import check_number, check_probability
    for ns in args.robot or []:
        problem = namespace_problem(ns)
        if problem:
            raise SafemanipError(f'--robot {problem}')
    check_probability('--alpha', args.alpha)
    check_number('--max-rollouts', args.max_rollouts, 0)
    from ..settings import MAX_DURATION_S
    check_number('--max-duration-s', args.max_duration_s, 0, MAX_DURATION_S)

    def strings(items: list[str]) -> str:
        return '[' + ', '.join(json.dumps(i) for i in items) + ']'

    ros = ['--ros-args', '-p', f'limits:={strings([f"{n}={x!r}" for n, x in limits.items()])}',
           '-p', f'robots:={strings(args.robot or [""])}', '-p', f'unit:={args.unit}', '-p', f'alpha:={args.alpha!r}',
           '-p', f'max_rollouts:={args.max_rollouts}', '-p', f'max_duration_s:={float(args.max_duration_s)!r}']
    if args.state:
        ros += ['-p', f'state_file:={args.state}']
    if args.alerts:
        ros += ['-p', f'alerts_file:={args.alerts}']
    if args.rebuild_from:
        ros += ['-p', f'rebuild_from:={strings(args.rebuild_from)}']
    from .options import foxglove_parameters
    fox = foxglove_parameters(args)
    for key, value in fox.items():
        ros += ['-p', f'{key}:={json.dumps(value)}']
    from ..nodes.gate_node import main as gate_main
    return gate_main(ros, foxglove=bool(fox))


def check_sequential_limits(limits: dict[str, float], alpha: float, flag: str = '--sequential') -> None:
    """Limits a sequential test can take (strictly between 0 and 1) and a valid ``--alpha``."""
    from .options import check_probability
    check_probability('--alpha', alpha)
    bad = [f'{n}={x:g}' for n, x in limits.items() if not 0 < x < 1]
    if bad:
        raise SafemanipError(f'{flag} needs limits strictly between 0 and 1: {", ".join(bad)}')


def _sequential_gate(report: Report, limits: dict[str, float], args: argparse.Namespace) -> int:
    """``gate --sequential``: each limit's anytime-valid test replayed over
    the report's rollouts in order (audit/sequential.py)."""
    from ..audit.sequential import FAIL, PASS, plain_decision, sequential_decisions
    if args.baseline:
        raise SafemanipError('--sequential decides against --max-rate limits; it takes no --baseline')
    if not limits:
        raise SafemanipError('--sequential needs at least one --max-rate NAME=X')
    check_sequential_limits(limits, args.alpha)
    replays = sequential_decisions(report, limits, args.alpha, args.unit)
    print(f'sequential gate: {len(limits)} limit(s), family-wise alpha {args.alpha:g} for a wrong PASS and for a '
          f'wrong FAIL (each test {args.alpha / len(limits):.4g}), unit: {args.unit}, '
          f'{len(report.get("episodes") or []) or report.get("rollouts", 0)} rollouts in report order')
    print(f'{"name":40s} {"limit":>7s} {"result":9s} {"after":>14s} {"of":>14s}  evidence (log, need '
          f'{replays[0].test.threshold:.2f})')
    unit = args.unit + 's'
    for lr in replays:
        r = lr.result
        after = '-' if r.after is None else f'{r.after} {unit}' if args.unit == 'rollout' else \
            f'{r.after} ({r.batches} r.)'
        total = f'{r.observations} {unit}' if args.unit == 'rollout' else \
            f'{r.observations} ({len(lr.batches)} r.)'
        print(f'{lr.name[:40]:40s} {lr.test.limit:>7.4f} {r.decision or "UNDECIDED":9s} {after:>14s} {total:>14s}  '
              f'below {r.log_pass:.2f}, above {r.log_fail:.2f}')
    for lr in replays:           # each decision in a release manager's words
        r = lr.result
        print(plain_decision(lr.name, "", r.observations, r.violations, len(lr.batches),
                             lr.test, args.unit, r.decision, r.after))
    outcomes = [lr.result.decision for lr in replays]
    if FAIL in outcomes:
        return 1
    return 0 if all(o == PASS for o in outcomes) else UNDECIDED_EXIT


def run_gate_cmd(args: argparse.Namespace) -> int:
    from ..audit.gate import evaluate_gate, parse_limits
    limits = parse_limits(args.max_rate)
    if not limits and not args.baseline:
        raise SafemanipError('give at least one --max-rate NAME=X or a --baseline')
    from .options import check_number, check_probability
    check_probability('--confidence', args.confidence)
    for name, value in limits.items():
        check_number(f'--max-rate {name}', value, 0)
    if args.live:
        return _live_gate(limits, args)
    if args.foxglove or args.operator_credential or args.foxglove_mcap:
        raise SafemanipError('--foxglove serves a live gate: give --live (a report\'s gate decides at once)')
    if not args.report:
        raise SafemanipError('give REPORT.json (or --live)')
    from ..audit.schema import check_consistent
    report = _load(args.report)
    check_consistent(report, args.report)
    if args.sequential:
        return _sequential_gate(report, limits, args)
    baseline = _load(args.baseline) if args.baseline else None
    if baseline is not None:
        check_consistent(baseline, args.baseline)
    rows = evaluate_gate(report, limits, baseline, args.confidence, args.min_triggers)
    print(f'{"name":40s} {"kind":9s} {"rate":>8s} {"upper":>8s} {"limit":>7s} {"baseline":>9s} {"unknown":>8s}  '
          f'result  why')
    def f(x: float | None) -> str:
        return '-' if x is None else f'{x:.4f}'

    for r in rows:
        entry: Mapping[str, Any] = report['properties'].get(r.name) or report['categories'].get(r.name) or {}
        why = r.why + ('; decided by unknown_as on a large share of frames' if entry.get('unknown_flagged') else '')
        print(f'{r.name[:40]:40s} {r.kind:9s} {f(r.rate):>8s} {f(r.upper):>8s} {f(r.limit):>7s} {f(r.baseline):>9s} '
              f'{f(entry.get("unknown_share")):>8s}  {"PASS" if r.passed else "FAIL":6s}  {why}')
    for r in rows:           # each decision in a release manager's words
        entry = report['properties'].get(r.name) or report['categories'].get(r.name) or {}
        clusters = entry.get('clusters') or {}
        k, n = sum(clusters.get('violations') or []), sum(clusters.get('triggers') or [])
        bound = '' if r.upper is None or r.limit is None else \
            f'; upper bound {r.upper:.3g} {"<=" if r.upper <= r.limit else ">"} limit {r.limit:g} at ' \
            f'{args.confidence:g} confidence'
        print(f'{"PASS" if r.passed else "FAIL"}: {r.name} ({r.kind}): {k} of {n} triggers violated in '
              f'{report.get("rollouts", 0)} rollouts{bound}; {r.why}')
    return 0 if all(r.passed for r in rows) else 1
