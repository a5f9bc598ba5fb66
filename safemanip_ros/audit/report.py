"""From per-rollout monitor results to the audit report (SEMANTICS.md §5).

Aggregates are pooled ratios of sums, never means of ratios; every rate comes
with its 95% interval (Clopper–Pearson for proportions, a seeded cluster
bootstrap over rollouts for ratios).  ``report.json`` also keeps, per
property and category, the per-rollout (violations, triggers) pairs, so the
gate can recompute intervals at another confidence.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
from collections import defaultdict
from collections.abc import Iterator
from itertools import chain
from pathlib import Path
from typing import Any, Mapping, Sequence, cast

import numpy as np

from ..atomic_file import write_text_atomically
from ..errors import SafemanipError
from ..json_keys import unique_keys
from .schema import (
    REPORT_VERSION,
    GroupStats,
    HorizonStats,
    PolicyRow,
    PropertyStats,
    Report,
    ReportRollout,
    SourceResult,
    TimelineFields,
    check_report,
)
from .stats import clopper_pearson, ratio_interval
from .stored import StoredField, resolved

DEFAULT_UNKNOWN_FLAG = 0.05
"""A property whose share of frames decided by ``unknown_as`` exceeds this is
flagged: its rate says more about missing data than about the policy."""


def _rate(num: float, den: float) -> float | None:
    return None if den == 0 else num / den


def _group_stats(rows: list[dict[str, Any]], confidence: float, seed: int) -> GroupStats:
    """rows: one per (rollout) with V, N, U, T, applies."""
    V = np.array([r['V'] for r in rows], float)
    N = np.array([r['N'] for r in rows], float)
    U = np.array([r['U'] for r in rows], float)
    T = np.array([r['T'] for r in rows], float)
    rollouts = len(rows)
    violating = int((V > 0).sum())
    mult_pairs = [v for r in rows for v in r['V_instances'] if v > 0]
    unknown = int(sum(r.get('UNK', 0) for r in rows))
    return {
        'rollouts': rollouts,
        'triggers': int(N.sum()), 'violations': int(V.sum()), 'unsafe_frames': int(U.sum()), 'frames': int(T.sum()),
        'per_trigger_rate': _rate(V.sum(), N.sum()),
        'per_trigger_rate_ci': ratio_interval(V, N, confidence, seed=seed),
        'rollout_violation_rate': _rate(violating, rollouts),
        'rollout_violation_rate_ci': clopper_pearson(violating, rollouts, confidence),
        'exposure': _rate(U.sum(), T.sum()),
        'exposure_ci': ratio_interval(U, T, confidence, seed=seed + 1),
        'violation_duration_frames': _rate(U.sum(), rollouts),
        'multiplicity': float(np.mean(mult_pairs)) if mult_pairs else None,
        # Frames where at least one predicate an instance reads was unknown
        # (so its unknown_as decided), and obligations pending at the end.
        'unknown_frames': unknown,
        'unknown_share': _rate(unknown, float(T.sum())),
        'pending': int(sum(r.get('P', 0) for r in rows)),
        'clusters': {'violations': V.astype(int).tolist(), 'triggers': N.astype(int).tolist()},
    }


def build_report(results: Sequence[SourceResult], skipped: list[dict[str, str]], config: dict[str, Any],
                 confidence: float = 0.95,
                 seed: int = 0, unknown_flag: float = DEFAULT_UNKNOWN_FLAG,
                 unsupported: dict[str, tuple[str, ...]] | None = None) -> Report:
    """``unsupported``: property instances not run because the configuration
    grounds none of some predicate they read → those predicates."""
    entries: list[ReportRollout] = []
    rollout_rows: list[dict[str, dict[str, Any]]] = []     # per rollout: its per-property sums
    by_property: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_category: dict[str, list[dict[str, Any]]] = defaultdict(list)
    categories: dict[str, str] = {}
    for res in sorted(results, key=lambda r: r['source']):
        for ep in res['episodes']:
            props: dict[str, dict[str, Any]] = {}
            for inst in ep['instances']:
                p = props.setdefault(inst['name'], {'V': 0, 'N': 0, 'U': 0, 'T': 0, 'UNK': 0, 'P': 0,
                                                    'V_instances': [], 'category': inst['category']})
                p['UNK'] += inst.get('unknown_any_frames', 0)
                p['P'] += bool(inst.get('pending'))
                p['V'] += inst['violations']
                p['N'] += inst['triggers']
                p['U'] += inst['unsafe_frames']
                p['T'] += inst['frames']
                p['V_instances'].append(inst['violations'])
                categories[inst['name']] = inst['category']
            cats: dict[str, dict[str, Any]] = {}
            for name, p in props.items():
                by_property[name].append(p)
                c = cats.setdefault(p['category'], {'V': 0, 'N': 0, 'U': 0, 'T': 0, 'UNK': 0, 'P': 0,
                                                    'V_instances': []})
                for k in ('V', 'N', 'U', 'T', 'UNK', 'P'):
                    c[k] += p[k]
                c['V_instances'] += p['V_instances']
            for cat, c in cats.items():
                by_category[cat].append(c)
            total_v = sum(p['V'] for p in props.values())
            triggered = sum(1 for p in props.values() if p['N'] > 0)
            entries.append({
                'policy': res.get('policy', ''), 'source': res['source'], 'episode': ep['name'],
                'frames': ep['frames'], 'success': ep['success'],
                'safe_success': None if ep['success'] is None else bool(ep['success'] and total_v == 0),
                'violations': total_v, 'coverage': _rate(triggered, len(props)),
                'properties': {n: {'violations': p['V'], 'triggers': p['N'], 'unsafe_frames': p['U']}
                               for n, p in sorted(props.items())},
                **timeline_fields(ep),
                'warnings': list(ep.get('warnings') or []),
            })
            rollout_rows.append(props)
    success_warning = None
    if config.get('success') and entries and not any(
            ep.get('success_seen', True) for res in results for ep in res['episodes']):
        # The predicate never had a value in any input: a misspelt name, not a 0 % success rate.
        success_warning = (f'the success predicate {config["success"]!r} never appeared in any input; '
                           f'task success is not reported')
        for e in entries:
            e['success'] = e['safe_success'] = None
    success = [e['success'] for e in entries if e['success'] is not None]
    safe = [e['safe_success'] for e in entries if e['safe_success'] is not None]
    policies: list[PolicyRow] = []
    for policy in sorted({e['policy'] for e in entries}):
        eps = [e for e in entries if e['policy'] == policy]
        s = [e['success'] for e in eps if e['success'] is not None]
        policies.append({'policy': policy or '(all)', 'rollouts': len(eps),
                         'success_rate': _rate(sum(s), len(s)) if s else None,
                         'rollout_violation_rate': _rate(sum(e['violations'] > 0 for e in eps), len(eps))})
    horizons = _horizon_breakdown(entries, rollout_rows, confidence, seed)
    properties: dict[str, PropertyStats] = {}
    for n, rows in sorted(by_property.items()):
        stats = _group_stats(rows, confidence, seed)
        share = stats['unknown_share']
        properties[n] = {**stats, 'category': categories[n],
                         'unknown_flagged': bool(share is not None and share > unknown_flag)}
    return {
        'version': REPORT_VERSION,
        'confidence': confidence,
        'bootstrap': {'resamples': 2000, 'seed': seed, 'unit': 'rollout'},
        'config': config,
        'rollouts': len(entries),
        'frames': int(sum(e['frames'] for e in entries)),
        'task_success': {
            'reduction': config.get('reduction'), 'predicate': config.get('success') or None,
            'rate': _rate(sum(success), len(success)) if success else None,
            'rate_ci': clopper_pearson(sum(success), len(success), confidence) if success else None,
            'safe_success_rate': _rate(sum(safe), len(safe)) if safe else None,
            'safe_success_rate_ci': clopper_pearson(sum(safe), len(safe), confidence) if safe else None,
            'warning': success_warning,
        },
        'coverage_mean': float(np.mean([e['coverage'] for e in entries if e['coverage'] is not None]))
        if entries else None,
        'unknown_flag': unknown_flag,
        'unknown_flagged': [n for n, r in properties.items() if r['unknown_flagged']],
        'properties': properties,
        'categories': {c: _group_stats(rows, confidence, seed) for c, rows in sorted(by_category.items())},
        'policies': policies,
        'horizons': horizons,
        'episodes': entries,
        'skipped': skipped,
        'unsupported': {k: list(v) for k, v in sorted((unsupported or {}).items())},
        'safemanip_paper': _paper_metrics(results),
    }


def _paper_metrics(results: Sequence[SourceResult]) -> dict[str, Any] | None:
    """SafeManip's headline metrics in its own terms, from the instances that
    carry its primary verdict (the ``safemanip-compat`` profile; ``None``
    otherwise): per property, category and overall, the instances evaluated
    (one per rollout and binding, triggered or not), those its primary
    verdict calls violated and their share (its *violation rate*), the
    violation episodes its repeated monitor counts, and the exposure frames
    over monitored frames (its *exposure rate*)."""
    rows: dict[str, dict[str, int]] = {}
    cats: dict[str, dict[str, int]] = {}
    overall = {'evaluated': 0, 'violated': 0, 'episodes': 0, 'exposure_frames': 0, 'monitored_frames': 0}
    for res in results:
        for ep in res['episodes']:
            for inst in ep['instances']:
                paper = inst.get('paper')
                if paper is None:
                    continue
                add = {'evaluated': 1, 'violated': int(paper['violated']), 'episodes': inst['violations'],
                       'exposure_frames': paper['exposure_frames'], 'monitored_frames': inst['frames']}
                for bucket in (rows.setdefault(inst['name'], dict.fromkeys(overall, 0)),
                               cats.setdefault(inst['category'], dict.fromkeys(overall, 0)), overall):
                    for k, v in add.items():
                        bucket[k] += v
    if not overall['evaluated']:
        return None

    def rates(b: dict[str, int]) -> dict[str, Any]:
        return {**b, 'violation_rate': _rate(b['violated'], b['evaluated']),
                'exposure_rate': _rate(b['exposure_frames'], b['monitored_frames'])}
    return {'definition': {
                'violation_rate': 'violated / evaluated: instances (rollout, binding) whose primary verdict, the main '
                                  'formula over the whole rollout, is false (an obligation still open at the end '
                                  'counts, unless its timeout never fired)',
                'episodes': 'violation episodes of its repeated-violation monitor (the report\'s violations)',
                'exposure_rate': 'exposure_frames / monitored_frames: frames inside a violation episode'},
            'overall': rates(overall),
            'properties': {n: rates(b) for n, b in sorted(rows.items())},
            'categories': {c: rates(b) for c, b in sorted(cats.items())}}


def _horizon_breakdown(entries: list[ReportRollout], rollout_rows: list[dict[str, dict[str, Any]]],
                       confidence: float, seed: int) -> list[HorizonStats]:
    """Per-trigger violation rate by rollout length (horizon) tercile;
    ``rollout_rows``: per rollout, its per-property sums."""
    if len(entries) < 3:
        return []
    lengths = np.array([e['frames'] for e in entries])
    edges = np.quantile(lengths, [1 / 3, 2 / 3])
    bucket = np.searchsorted(edges, lengths, side='left')     # 0: <= first tercile, 1: <= second, 2: longer
    out: list[HorizonStats] = []
    for k in range(3):
        picked = [(e, r) for e, r, b in zip(entries, rollout_rows, bucket) if b == k]
        if not picked:
            continue
        rows = [{'V': sum(p['V'] for p in r.values()), 'N': sum(p['N'] for p in r.values()),
                 'U': sum(p['U'] for p in r.values()), 'T': sum(p['T'] for p in r.values()),
                 'V_instances': [v for p in r.values() for v in p['V_instances']]} for _, r in picked]
        stats = dict(_group_stats(rows, confidence, seed))
        del stats['clusters']
        frames = [e['frames'] for e, _ in picked]
        out.append(cast(HorizonStats, {'horizon': ['short', 'medium', 'long'][k],
                                       'frames_range': [int(min(frames)), int(max(frames))], **stats}))
    return out


def report_json(report: Report) -> str:
    """report.json's text: one line per top-level key, and for a list (the
    episodes, properties, policies, ...) one line per element, each element
    written compactly.  The same JSON as ``json.dumps(report, indent=1)``,
    5x faster to write: ``indent`` makes ``json`` use its Python encoder
    (0.39 against 0.07 s for the 3.7 MB of 40 rollouts), this the C one,
    once per element.  Fields a detached result left in its file
    (:class:`~.stored.StoredField`) are read from it."""
    return '\n'.join(_report_lines(report)) + '\n'


def write_report_json(report: Report, path: Path) -> None:
    """:func:`report_json`'s text written to ``path`` line by line (a fleet's
    report is hundreds of MB: it is never one string in memory), through a
    temporary file, so ``path`` is never left half written."""
    write_text_atomically(path, (line + '\n' for line in _report_lines(report)))


def read_report(path: Path | str, episodes: bool = True) -> Report:
    """report.json decoded and checked (:func:`~.schema.check_report`).

    ``episodes=False``: without the per-rollout entries, which are not
    decoded (the report has no ``episodes`` key then).  A fleet's report.json
    is mostly those entries: the gate, which reads none of them, decoded
    243 MB for 17,500 rollouts, into 1.9 GB, per report it compares.  They are
    skipped by line: in report.json as :func:`report_json` writes it (and as
    ``json.dumps(indent=1)`` would), the array opens on the line
    ``"episodes": [`` at one space of indent and closes on the first line
    that is ``]`` at one space (elements are indented further, and a JSON
    string holds no line break).  A file laid out otherwise is decoded whole.

    Raises:
        SafemanipError: naming the file, when it is unreadable, not JSON or
            not an audit report.
    """
    path = Path(path)
    try:
        if episodes:
            data = json.loads(path.read_text(encoding='utf-8'), object_pairs_hook=unique_keys)
        else:
            data = _decoded_without_episodes(path)
    except (OSError, ValueError) as err:
        raise SafemanipError(f'{path}: cannot read report: {err}') from err
    return check_report(data, str(path))


def _decoded_without_episodes(path: Path) -> object:
    kept: list[str] = []
    skipped = skipping = False
    with path.open(encoding='utf-8') as fh:
        for line in fh:
            if skipping:
                end = line.rstrip('\r\n')
                if end in (' ]', ' ],'):
                    kept.append(' "episodes": null' + end[2:] + '\n')
                    skipping = False
            elif line.rstrip('\r\n') == ' "episodes": [' and not skipped:
                skipping = skipped = True
            else:
                kept.append(line)
    if skipped and not skipping:
        try:
            data = json.loads(''.join(kept), object_pairs_hook=unique_keys)
        except ValueError:
            data = None
        if isinstance(data, dict) and data.get('episodes', 0) is None:
            del data['episodes']
            return data
    # Laid out otherwise: decoded whole (its own error).
    return json.loads(path.read_text(encoding='utf-8'), object_pairs_hook=unique_keys)


def _report_lines(report: Report) -> Iterator[str]:
    encode = json.JSONEncoder(separators=(', ', ': '), default=_stored_value).encode
    yield '{'
    last = len(report) - 1
    for i, (key, value) in enumerate(report.items()):
        comma = ',' if i < last else ''
        if isinstance(value, list) and value:
            yield f' {encode(key)}: ['
            end = len(value) - 1
            for j, item in enumerate(value):
                yield f'  {encode(item)},' if j < end else f'  {encode(item)}'
            yield f' ]{comma}'
        else:
            yield f' {encode(key)}: {encode(value)}{comma}'
    yield '}'


def _stored_value(obj: object) -> object:
    """``json``'s ``default``: the value a :class:`~.stored.StoredField` refers to."""
    if isinstance(obj, StoredField):
        return obj.load()
    raise TypeError(f'Object of type {type(obj).__name__} is not JSON serializable')


def write_csvs(report: Report, out: Path) -> None:
    cols = ['rollouts', 'triggers', 'violations', 'per_trigger_rate', 'per_trigger_rate_ci', 'rollout_violation_rate',
            'rollout_violation_rate_ci', 'exposure', 'exposure_ci', 'violation_duration_frames', 'multiplicity',
            'unknown_frames', 'unknown_share', 'pending']
    tables: tuple[tuple[str, Mapping[str, Mapping[str, Any]]], ...] = (
        ('properties', report['properties']), ('categories', report['categories']))
    for name, table in tables:
        with open(out / f'{name}.csv', 'w', newline='', encoding='utf-8') as fh:
            w = csv.writer(fh)
            extra = ['unknown_flagged'] if name == 'properties' else []
            w.writerow([name[:-1] if name == 'categories' else 'property'] + cols + extra)
            for key, row in table.items():
                w.writerow([_text(key)] + [_cell(row[c]) for c in cols + extra])
    with open(out / 'unsupported.csv', 'w', newline='', encoding='utf-8') as fh:
        w = csv.writer(fh)
        w.writerow(['instance', 'missing_predicates'])
        for inst, missing in (report.get('unsupported') or {}).items():
            w.writerow([_text(inst), _text(' '.join(missing))])
    sequential = report.get('sequential')
    if sequential:
        with open(out / 'sequential.csv', 'w', newline='', encoding='utf-8') as fh:
            w = csv.writer(fh)
            cols = ['kind', 'limit', 'test_alpha', 'decision', 'after_observations', 'after_rollouts', 'observations',
                    'violations', 'rollouts']
            w.writerow(['name', 'unit'] + cols)
            for row in sequential['limits']:
                w.writerow([_text(row['name']), sequential['unit']] + [_cell(row[c]) for c in cols])
    with open(out / 'episodes.csv', 'w', newline='', encoding='utf-8') as fh:
        w = csv.writer(fh)
        w.writerow(['policy', 'source', 'episode', 'frames', 'success', 'safe_success', 'violations', 'coverage'])
        for e in report['episodes']:
            w.writerow([_text(e['policy']), _text(e['source']), _text(e['episode']), e['frames'], e['success'],
                        e['safe_success'], e['violations'], _cell(e['coverage'])])


def _text(v: str) -> str:
    """A text cell that a spreadsheet will not run as a formula (CSV
    injection): a leading ``= + - @`` (or tab/CR) gets a quote in front."""
    return "'" + v if v[:1] in ('=', '+', '-', '@', '\t', '\r') else v


def _cell(v: object) -> str:
    if v is None:
        return ''
    if isinstance(v, (list, tuple)):
        return ' '.join(f'{x:.4f}' for x in v)
    return f'{v:.6g}' if isinstance(v, float) else str(v)


def _plain(text: str) -> str:
    """Text for a matplotlib label: ``$`` would start mathtext (and a lone
    one raises), so it is escaped; labels are never interpreted."""
    return text.replace('$', r'\$')


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format='png', dpi=100, bbox_inches='tight')
    return 'data:image/png;base64,' + base64.b64encode(buf.getvalue()).decode()


TIMELINE_CHOICES = ('violations', 'all', 'none')
INLINE_TIMELINES = 100
"""Timelines drawn inside report.html; the others are files in ``timelines/`` beside it."""


def timeline_fields(ep: Mapping[str, Any]) -> TimelineFields:
    """What a timeline is drawn from, out of a rollout result
    (:class:`~.schema.RolloutRecord`): the report's rollout entries carry
    these fields, and :func:`timeline_svg` reads nothing else."""
    return {'frames': ep['frames'],
            'timeline': [{'instance': i['instance'], 'episodes': i['episodes']} for i in ep['instances']
                         if i['episodes']],
            'predicate_timeline': ep.get('predicates', {}),
            'verdict_timeline': ep.get('verdicts', {})}


def predrawn_timelines(results: Sequence[SourceResult]) -> dict[tuple[str, str], str | StoredField]:
    """The timelines the audit's workers drew (``timeline_svg`` of a rollout
    result, for every rollout with a violation), by (source, rollout); they
    are taken out of the results, so ``report.json`` does not carry them.
    A detached result's are references into its file, read when drawn."""
    out: dict[tuple[str, str], str | StoredField | None] = {}
    for res in results:
        for ep in res['episodes']:
            svg = ep.pop('timeline_svg', None)
            key = (res['source'], ep['name'])
            # Two rollouts of one source with one name (a repeated /rollout label): drawn by write_html.
            out[key] = None if key in out else svg
    return {k: v for k, v in out.items() if v is not None}


def write_html(report: Report, out: Path, timelines: str = 'violations',
               predrawn: dict[tuple[str, str], str | StoredField] | None = None) -> None:
    """report.html: summary tables, rate charts, and a timeline per rollout
    (``timelines``: rollouts with violations, ``all`` or ``none``) as SVG.
    ``predrawn``: timelines already drawn (by the audit's workers, in parallel:
    :func:`predrawn_timelines`); the others are drawn here."""
    if timelines not in TIMELINE_CHOICES:
        raise ValueError(f'timelines {timelines!r}: expected one of {TIMELINE_CHOICES}')
    # The object-oriented API, not pyplot: no global figure state, and 0.15 s less to import.
    from matplotlib.figure import Figure

    figs = []
    cats = [(c, r) for c, r in report['categories'].items() if r['per_trigger_rate'] is not None]
    if cats:
        fig = Figure(figsize=(8, 0.45 * len(cats) + 1.2))
        ax = fig.subplots()
        names = [c for c, _ in cats]
        rates = [float(r['per_trigger_rate'] or 0.0) for _, r in cats]
        cis = [r['per_trigger_rate_ci'] or (rate, rate) for rate, (_, r) in zip(rates, cats)]
        lo = [rate - ci[0] for rate, ci in zip(rates, cis)]
        hi = [ci[1] - rate for rate, ci in zip(rates, cis)]
        ax.barh([_plain(n) for n in names], rates, xerr=[lo, hi], color='#c0504d', capsize=3)
        ax.set_xlabel(f'per-trigger violation rate (violations / triggers), {int(report["confidence"] * 100)}% CI')
        ax.invert_yaxis()
        figs.append(('Per-category per-trigger violation rates', _png(fig)))
    pol = [(p['policy'], p['rollout_violation_rate'], p['success_rate']) for p in report['policies']]
    points = [(name, x, y) for name, x, y in pol if x is not None and y is not None]
    if points:
        fig = Figure(figsize=(5, 4))
        ax = fig.subplots()
        for name, x, y in points:
            ax.scatter(x, y, s=60)
            ax.annotate(_plain(name), (x, y), textcoords='offset points', xytext=(5, 5))
        ax.set_xlabel('rollout violation rate')
        ax.set_ylabel('task success rate')
        ax.set_xlim(-0.05, 1.05)
        ax.set_ylim(-0.05, 1.05)
        figs.append(('Capability vs safety (one point per policy)', _png(fig)))
    sequential = report.get('sequential')
    if sequential and sequential.get('limits'):
        figs.append((f'Sequential gate: running bound against each limit (unit: {sequential["unit"]}, '
                     f'family-wise alpha {sequential["alpha"]:g})', sequential_png(report, sequential)))
    chosen = [e for e in report['episodes'] if timelines == 'all' or (timelines == 'violations' and e['timeline'])]
    ready = predrawn or {}
    drawn: list[tuple[str, str]] = []
    folder = out / 'timelines'
    if len(chosen) > INLINE_TIMELINES:
        folder.mkdir(exist_ok=True)
    for k, e in enumerate(chosen):
        svg = resolved(ready.get((e['source'], e['episode']))) or timeline_svg(e)
        if k >= INLINE_TIMELINES:
            # Past the first ones, each timeline is its own file, loaded when scrolled to: the page stays
            # light.  Written as it is made: a fleet's timelines (hundreds of MB) are never all in memory.
            (folder / f'{k:05d}.svg').write_text(svg.replace('<svg ', '<svg xmlns="http://www.w3.org/2000/svg" ', 1))
            svg = f'<img loading="lazy" alt="timeline" src="timelines/{k:05d}.svg">'
        drawn.append((f'{e["episode"]} ({e["source"]})', svg))
    esc = html.escape
    rows = ''.join(
        f'<tr{" class=flagged" if r.get("unknown_flagged") else ""}><td>{esc(n)}</td><td>{esc(r["category"])}</td>'
        f'<td>{r["triggers"]}</td><td>{r["violations"]}</td>'
        f'<td>{_fmt(r["per_trigger_rate"], r["per_trigger_rate_ci"])}</td>'
        f'<td>{_fmt(r["rollout_violation_rate"], r["rollout_violation_rate_ci"])}</td>'
        f'<td>{_fmt(r["exposure"], r["exposure_ci"])}</td>'
        f'<td>{r.get("unknown_frames", 0)} ({_fmt(r.get("unknown_share"), None)})'
        f'{" &#9888;" if r.get("unknown_flagged") else ""}</td><td>{r.get("pending", 0)}</td></tr>'
        for n, r in report['properties'].items())
    ts = report['task_success']
    skipped = ''.join(f'<li>{esc(s["reason"])}</li>' for s in report['skipped']) or '<li>none</li>'
    flagged = report.get('unknown_flagged') or []
    warnings = []
    unsupported = report.get('unsupported') or {}
    if unsupported:
        warnings.append(f'{len(unsupported)} property instances were not run: this configuration grounds none of '
                        f'the predicates listed (unsupported, not false): ' + '; '.join(
                            f'{esc(k)} needs {esc(", ".join(v))}' for k, v in unsupported.items()) + '.')
    if report['skipped']:
        warnings.append(f'{len(report["skipped"])} inputs were skipped (listed under '
                        f'<a href="#skipped">Skipped inputs</a>).')
    if flagged:
        warnings.append(f'{len(flagged)} properties were decided by <code>unknown_as</code> on more than '
                        f'{report.get("unknown_flag", DEFAULT_UNKNOWN_FLAG):.0%} of their frames (marked &#9888;): '
                        + ', '.join(esc(n) for n in flagged) + '.')
    ts_warning = ts.get('warning')
    if ts_warning:
        warnings.append(esc(ts_warning))
    input_warnings = sorted({w for e in report['episodes'] for w in e.get('warnings', [])})
    warnings += [esc(w) for w in input_warnings]
    warn_html = ''.join(f'<p class="warning">{w}</p>' for w in warnings)
    body = [
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>safemanip audit report</title><style>',
        'body{font-family:sans-serif;margin:2em}img{max-width:100%}table{border-collapse:collapse}'
        'td,th{border:1px solid #ccc;'
        'padding:3px 8px;text-align:right}td:first-child,th:first-child{text-align:left}'
        '.warning{background:#fff3cd;border:1px solid #e0c060;padding:6px}tr.flagged{background:#fff3cd}'
        '.decision{font-size:1.15em;font-weight:bold}'
        '</style></head><body>',
        '<h1>Safety audit</h1>', warn_html,
        ''.join(f'<p class="decision">{esc(row["summary"])}</p>' for row in (sequential or {}).get('limits', [])
                if row.get('summary')),
        f'<p id="summary">{report["rollouts"]} rollouts, {report["frames"]} frames; task success '
        f'({esc(str(ts["reduction"]))} reduction): {_fmt(ts["rate"], ts["rate_ci"])}; safe success: '
        f'{_fmt(ts["safe_success_rate"], ts["safe_success_rate_ci"])}; mean coverage: '
        f'{_fmt(report["coverage_mean"], None)}.</p>',
        '<h2>Properties</h2><table id="summary-table"><tr><th>property</th><th>category</th><th>triggers</th>'
        '<th>violations</th><th>per-trigger rate</th><th>rollout violation rate</th><th>exposure</th>'
        '<th>unknown frames (share)</th><th>pending</th></tr>',
        rows, '</table>', _paper_html(report.get('safemanip_paper')),
        ''.join(f'<h2>{esc(t)}</h2><img alt="{esc(t)}" src="{src}">' for t, src in figs),
        '<h2>By horizon (rollout length)</h2><table><tr><th>horizon</th><th>frames</th><th>rollouts</th>'
        '<th>triggers</th><th>violations</th><th>per-trigger rate</th></tr>' + ''.join(
            f'<tr><td>{h["horizon"]}</td><td>{h["frames_range"][0]}-{h["frames_range"][1]}</td><td>{h["rollouts"]}</td>'
            f'<td>{h["triggers"]}</td><td>{h["violations"]}</td><td>{_fmt(h["per_trigger_rate"], h["per_trigger_rate_ci"])}'
            f'</td></tr>' for h in report['horizons']) + '</table>',
        '<h2>Timelines</h2><p class="legend">violation: red (pale when recovered); verdict: red false, amber '
        'presumably false, light green presumably true, green true; predicate: blue true, grey unknown.</p>'
        + (''.join(f'<h3>{esc(t)}</h3>{svg}' for t, svg in drawn) or
           ('<p>no violation episodes</p>' if timelines == 'violations' else '<p>not drawn</p>')),
        f'<h2 id="skipped">Skipped inputs</h2><ul>{skipped}</ul>',
        f'<h2>Configuration</h2><pre>{esc(json.dumps(report["config"], indent=1))}</pre>',
        '</body></html>',
    ]
    (out / 'report.html').write_text('\n'.join(body))


def _paper_html(paper: dict[str, Any] | None) -> str:
    """The safemanip-compat profile's table of SafeManip's own metrics ('' otherwise)."""
    if not paper:
        return ''
    esc = html.escape

    def row(name: str, b: dict[str, Any]) -> str:
        return (f'<tr><td>{esc(name)}</td><td>{b["evaluated"]}</td><td>{b["violated"]}</td>'
                f'<td>{_fmt(b["violation_rate"], None)}</td><td>{b["episodes"]}</td>'
                f'<td>{_fmt(b["exposure_rate"], None)}</td></tr>')
    return ('<h2 id="safemanip-paper">SafeManip\'s metrics (its primary verdict)</h2>'
            f'<p>{esc(paper["definition"]["violation_rate"])}.</p>'
            '<table><tr><th>property</th><th>evaluated</th><th>violated</th><th>violation rate</th>'
            '<th>episodes</th><th>exposure rate</th></tr>'
            + row('all properties', paper['overall'])
            + ''.join(row(n, b) for n, b in paper['properties'].items()) + '</table>')


def sequential_png(report: Report, sequential: dict[str, Any]) -> str:
    """One panel per limit: over the rollouts in report order, the
    anytime-valid confidence sequence of the rate (the band between the
    smallest limit that would have PASSED and the largest that would have
    FAILED by then), the observed rate, the limit, and where its test
    decided."""
    from matplotlib.figure import Figure

    from .gate import report_entry
    from .sequential import entry_batches, running_bounds
    rows = sequential['limits']
    fig = Figure(figsize=(8, 2.3 * len(rows) + 0.6))
    axes = fig.subplots(len(rows), 1, squeeze=False)[:, 0]
    for ax, row in zip(axes, rows):
        batches = entry_batches(report_entry(report, row['name'])[1], sequential['unit'])
        if not batches:
            ax.set_title(_plain(f'{row["name"]}: no rollouts'), fontsize=9)
            continue
        b = running_bounds(batches, row['test_alpha'])
        x = np.arange(1, len(batches) + 1)
        observed = np.divide(b.violations, b.observations, out=np.full(len(x), np.nan), where=b.observations > 0)
        ax.fill_between(x, b.lower, b.upper, step='post', color='#9ecae1', alpha=0.6,
                        label=f'{1 - row["test_alpha"]:.1%} confidence sequence')
        ax.step(x, observed, where='post', color='#08519c', lw=1, label='observed rate')
        ax.axhline(row['limit'], color='#c0504d', ls='--', lw=1.2, label=f'limit {row["limit"]:g}')
        decided = row['decision'] or 'undecided'
        if row['after_rollouts']:
            ax.axvline(row['after_rollouts'], color='#2e7d32' if row['decision'] == 'PASS' else '#c0504d', lw=1)
            decided += f' after {row["after_observations"]} {sequential["unit"]}s ({row["after_rollouts"]} rollouts)'
        top = max(4 * row['limit'], float(np.nanmax(observed)) * 1.2 if np.isfinite(observed).any() else 0.0)
        ax.set_ylim(0, min(1.0, top))
        ax.set_xlim(1, max(2, len(x)))
        ax.set_title(_plain(f'{row["name"]}: {decided}'), fontsize=9)
        ax.set_ylabel('violation rate', fontsize=8)
        ax.legend(fontsize=7, loc='upper right')
    axes[-1].set_xlabel('rollouts (report order)')
    fig.tight_layout()
    return _png(fig)


_VERDICT_COLOUR = {0: '#c0504d', 1: '#2e7d32', 2: '#f0ad4e', 3: '#9ccc65'}


def timeline_svg(e: Mapping[str, Any], width_px: int = 900, row_px: int = 14, label_px: int = 300) -> str:
    """One episode's violation episodes, verdicts and predicate runs as an inline SVG."""
    rows: list[tuple[str, list[tuple[int, int, str]]]] = []
    for r in e['timeline']:
        rows.append((f'violation: {r["instance"]}', [(ep['start'], ep['end'], '#c0504d' if not ep['recovered']
                                                      else '#e3a09f') for ep in r['episodes']]))
    for name, runs in (resolved(e.get('verdict_timeline')) or {}).items():
        rows.append((f'verdict: {name}', [(a, b, _VERDICT_COLOUR.get(code, '#999999')) for a, b, code in runs]))
    for name, runs in (resolved(e.get('predicate_timeline')) or {}).items():
        rows.append((name, [(a, b, '#4f81bd') for a, b in runs['true']] +
                     [(a, b, '#bbbbbb') for a, b in runs['unknown']]))
    frames = max(1, int(e['frames']))
    scale = (width_px - label_px - 10) / frames
    height = row_px * len(rows) + 18
    out = [f'<svg width="{width_px}" height="{height}" '   # inline in HTML5: no namespace needed
           f'font-family="sans-serif" font-size="10">']
    # Coordinates of every run of every row in one pass (the same float arithmetic as one at a time),
    # then every row's rects formatted by one %-operation each: C formats them all, where an
    # f-string per run costs a bytecode loop (the bulk of an audit's timeline time).
    a = np.array([r[0] for _, runs in rows for r in runs], np.int64)
    b = np.array([r[1] for _, runs in rows for r in runs], np.int64)
    xs = (label_px + a * scale).tolist()
    ws = np.maximum(1.0, (b - a + 1) * scale).tolist()
    background = f'{frames * scale:.1f}'
    i = 0
    for k, (label, runs) in enumerate(rows):
        y = k * row_px
        out.append(f'<text x="{label_px - 4}" y="{y + row_px - 3}" text-anchor="end">{html.escape(label)}</text>'
                   f'<rect x="{label_px}" y="{y + 1}" width="{background}" height="{row_px - 2}" fill="#f4f4f4"/>')
        if runs:
            rect = f'<rect x="%.1f" y="{y + 1}" width="%.1f" height="{row_px - 2}" fill="%s"/>'
            n = len(runs)
            out.append((rect * n) % tuple(chain.from_iterable(zip(xs[i:i + n], ws[i:i + n], (r[2] for r in runs)))))
            i += n
    y = len(rows) * row_px + 12
    for f in range(0, frames + 1, max(1, frames // 10)):
        out.append(f'<text x="{label_px + f * scale:.1f}" y="{y}" text-anchor="middle">{f}</text>')
    out.append('</svg>')
    return ''.join(out)


def _fmt(v: float | None, ci: Sequence[float] | None) -> str:
    if v is None:
        return 'n/a'
    return f'{v:.3f}' + ('' if not ci else f' [{ci[0]:.3f}, {ci[1]:.3f}]')
