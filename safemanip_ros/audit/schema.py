"""The typed shape of the audit's files, shared by the engine (per-source
results), the report (``report.json``) and the gate, in the way rosbags
types ``metadata.yaml``: TypedDicts, plus one check for files read back.

``report.json`` carries ``version`` (:data:`REPORT_VERSION`); a reader
refuses a file that is not a report instead of failing on a missing key.
"""

from __future__ import annotations

import math
from typing import Any, TypedDict

from ..errors import SafemanipError

REPORT_VERSION = 2


class EpisodeSpan(TypedDict):
    start: int
    end: int
    recovered: bool


class _InstanceFields(TypedDict):

    name: str
    instance: str
    category: str
    severity: str
    triggers: int
    violations: int
    pending: bool
    unsafe_frames: int
    frames: int
    unknown_frames: dict[str, int]
    unknown_any_frames: int
    episodes: list[EpisodeSpan]


class InstanceRecord(_InstanceFields, total=False):
    """One instance over one rollout (``InstanceResult.to_dict``); ``paper``
    only under the safemanip-compat profile: ``{violated, exposure_frames}``,
    SafeManip's primary verdict."""

    paper: dict[str, Any]


class _RolloutFields(TypedDict):

    name: str
    frames: int
    success: bool | None
    success_seen: bool
    instances: list[InstanceRecord]
    warnings: list[str]
    predicates: dict[str, dict[str, list[list[int]]]]
    verdicts: dict[str, list[list[int]]]


class RolloutRecord(_RolloutFields, total=False):
    """One rollout of a source, as the engine stores it; ``timeline_svg``:
    its report timeline, drawn by the worker when the rollout has a
    violation (``report.predrawn_timelines``).  In the results of
    ``run_audit(detach_timelines=True)``, ``predicates``, ``verdicts`` and
    ``timeline_svg`` are :class:`~.stored.StoredField` references into the
    stored file instead (read with :func:`~.stored.resolved`)."""

    timeline_svg: str


class _SourceFields(TypedDict):
    source: str
    episodes: list[RolloutRecord]


class SourceResult(_SourceFields, total=False):
    """One source's rollouts (``records.source_result``); ``key``: the key
    it was computed under, in its file ``OUT/episodes/<name>.json`` (a resumed
    audit compares it); ``policy``: the label ``run_audit`` gives its input
    (``label=path``), not stored."""

    key: str
    policy: str


class Clusters(TypedDict):
    violations: list[int]
    triggers: list[int]


class _RateFields(TypedDict):
    rollouts: int
    triggers: int
    violations: int
    unsafe_frames: int
    frames: int
    per_trigger_rate: float | None
    per_trigger_rate_ci: tuple[float, float] | None
    rollout_violation_rate: float | None
    rollout_violation_rate_ci: tuple[float, float] | None
    exposure: float | None
    exposure_ci: tuple[float, float] | None
    violation_duration_frames: float | None
    multiplicity: float | None
    unknown_frames: int
    unknown_share: float | None
    pending: int


class GroupStats(_RateFields):
    """Aggregates of a category (SEMANTICS.md §5), with intervals, and the
    per-rollout counts the gate recomputes intervals from."""

    clusters: Clusters


class PropertyStats(GroupStats):
    """Aggregates of a property: a category's, its category, and whether
    its unknown share passed the report's ``unknown_flag``."""

    category: str
    unknown_flagged: bool


class HorizonStats(_RateFields):
    """Aggregates over the rollouts of one length tercile."""

    horizon: str                    # short, medium or long
    frames_range: list[int]         # [shortest, longest] rollout of the tercile, frames


class PolicyRow(TypedDict):
    policy: str                     # the input's label, ``(all)`` for a single input
    rollouts: int
    success_rate: float | None
    rollout_violation_rate: float | None


class RolloutCounts(TypedDict):
    violations: int
    triggers: int
    unsafe_frames: int


class TimelineRun(TypedDict):
    instance: str
    episodes: list[EpisodeSpan]


class TimelineFields(TypedDict):
    """What a rollout's timeline is drawn from (``report.timeline_fields``)."""

    frames: int
    timeline: list[TimelineRun]
    predicate_timeline: dict[str, dict[str, list[list[int]]]]
    verdict_timeline: dict[str, list[list[int]]]


class ReportRollout(TimelineFields):
    """One rollout row of ``report.json`` (its list and name keys, ``episodes`` and
    ``episode``, keep the names the file format was published with)."""

    policy: str
    source: str
    episode: str
    success: bool | None
    safe_success: bool | None
    violations: int
    coverage: float | None          # share of the rollout's properties that triggered
    properties: dict[str, RolloutCounts]
    warnings: list[str]


class TaskSuccess(TypedDict):
    reduction: str | None
    predicate: str | None
    rate: float | None
    rate_ci: tuple[float, float] | None
    safe_success_rate: float | None
    safe_success_rate_ci: tuple[float, float] | None
    warning: str | None


class _ReportFields(TypedDict):

    version: int
    confidence: float
    bootstrap: dict[str, Any]
    config: dict[str, Any]
    rollouts: int
    frames: int
    task_success: TaskSuccess
    coverage_mean: float | None
    unknown_flag: float
    unknown_flagged: list[str]
    properties: dict[str, PropertyStats]
    categories: dict[str, GroupStats]
    policies: list[PolicyRow]
    horizons: list[HorizonStats]
    episodes: list[ReportRollout]
    skipped: list[dict[str, str]]
    unsupported: dict[str, list[str]]          # instance → predicates nothing grounds (not run)
    safemanip_paper: dict[str, Any] | None     # SafeManip's own metrics (safemanip-compat profile), else None


class Report(_ReportFields, total=False):
    """``report.json``; ``sequential``: the sequential gate's decisions
    (``safemanip audit --max-rate ... --sequential``), when it ran."""

    sequential: dict[str, Any]


_REQUIRED = {'version': int, 'rollouts': int, 'properties': dict, 'categories': dict, 'skipped': list}


def check_report(data: object, where: str) -> Report:
    """``data`` (decoded JSON) as a :class:`Report`, or an error naming what is wrong."""
    if not isinstance(data, dict):
        raise SafemanipError(f'{where}: not an audit report (a JSON object is expected)')
    missing = [k for k, t in _REQUIRED.items() if not isinstance(data.get(k), t) or isinstance(data.get(k), bool)]
    if missing:
        raise SafemanipError(f'{where}: not an audit report (no valid {", ".join(missing)}); '
                             f'give the report.json written by safemanip audit')
    if 'episodes' in data and not isinstance(data['episodes'], list):
        raise SafemanipError(f'{where}: not an audit report (episodes is {_describe(data["episodes"])}, not a '
                             f'list); give the report.json written by safemanip audit')
    if data['version'] != REPORT_VERSION:
        raise SafemanipError(f'{where}: report version {data["version"]}, this safemanip reads version '
                             f'{REPORT_VERSION}: audit again')
    return data  # type: ignore[return-value]


def check_consistent(report: Report, where: str) -> None:
    """A SafemanipError naming the first row of ``report`` whose numbers
    contradict each other (what a gate must not decide on)."""
    if report['rollouts'] < 0:
        raise SafemanipError(f'{where}: rollouts {report["rollouts"]} < 0: the report is inconsistent (edited or '
                             f'corrupt); audit again')
    for section, kind in (('properties', 'property'), ('categories', 'category')):
        for name, row in report[section].items():  # type: ignore[literal-required]
            problem = _row_problem(row)
            if problem is None and row['rollouts'] > report['rollouts']:
                problem = f'{row["rollouts"]} rollouts, more than the report\'s {report["rollouts"]}'
            if problem:
                raise SafemanipError(f'{where}: {kind} {name!r}: {problem}: the report is inconsistent (edited or '
                                     f'corrupt); audit again')
    problem = _category_problem(report)
    if problem:
        raise SafemanipError(f'{where}: {problem}: the report is inconsistent (edited or corrupt); audit again')


def _category_problem(report: Report) -> str | None:
    """A category row whose counts are not the sums of its properties' (audit/report.py adds them up), or a
    property whose category has no row."""
    sums: dict[str, list[int]] = {}
    for name, row in report['properties'].items():
        category = row.get('category')
        if not isinstance(category, str):
            continue
        if category not in report['categories']:
            return f'property {name!r} is of category {category!r}, which has no row'
        total = sums.setdefault(category, [0, 0])
        total[0] += row['violations']
        total[1] += row['triggers']
    for category, (violations, triggers) in sums.items():
        group = report['categories'][category]
        if (group['violations'], group['triggers']) != (violations, triggers):
            return (f'category {category!r}: {group["violations"]} violations and {group["triggers"]} triggers, but its '
                    f'properties add up to {violations} and {triggers}')
    return None


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _describe(value: object) -> str:
    return f'{type(value).__name__} {value!r}'[:60]


def _row_problem(row: object) -> str | None:
    """What is inconsistent in one property or category row of a report
    (counts that are not non-negative integers, clusters that do not add up
    to the counts, a rate that is not violations / triggers, an unknown
    share outside 0..1), or None."""
    if not isinstance(row, dict):
        return 'not an object'
    for key in ('rollouts', 'triggers', 'violations'):
        if not _count(row.get(key)):
            return f'{key} {row.get(key)!r} is not a count'
    clusters = row.get('clusters')
    if not isinstance(clusters, dict) or not all(isinstance(clusters.get(k), list) for k in ('violations', 'triggers')):
        return 'no clusters (violations and triggers per rollout)'
    v, n = clusters['violations'], clusters['triggers']
    if len(v) != len(n) or not all(map(_count, v)) or not all(map(_count, n)):
        return 'its clusters are not two equally long lists of counts'
    if len(v) != row['rollouts']:
        return f'its clusters list {len(v)} rollouts, not {row["rollouts"]}'
    if sum(v) != row['violations'] or sum(n) != row['triggers']:
        return (f'its clusters add up to {sum(v)} violations and {sum(n)} triggers, not {row["violations"]} and '
                f'{row["triggers"]}')
    share = row.get('unknown_share')
    if share is not None and not (_number(share) and 0 <= share <= 1):
        return f'unknown_share {share!r} is not a share of frames (0 to 1)'
    rate = row.get('per_trigger_rate')
    if row['triggers'] == 0:
        if rate is not None:
            return f'per_trigger_rate {rate!r} with no trigger'
    elif not isinstance(rate, (int, float)) or isinstance(rate, bool) or not math.isfinite(rate) or \
            abs(rate - row['violations'] / row['triggers']) > 1e-9 * max(1.0, abs(rate)):
        return f'per_trigger_rate {rate!r} is not {row["violations"]} / {row["triggers"]}'
    return None
