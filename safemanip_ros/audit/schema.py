"""The typed shape of the audit's files, shared by the engine (per-source
results), the report (``report.json``) and the gate, in the way rosbags
types ``metadata.yaml``: TypedDicts, plus one check for files read back.

``report.json`` carries ``version`` (:data:`REPORT_VERSION`); a reader
refuses a file that is not a report instead of failing on a missing key.
"""

from __future__ import annotations

from typing import Any, TypedDict

from ..errors import SafemanipError

REPORT_VERSION = 2


class EpisodeSpan(TypedDict):
    start: int
    end: int
    recovered: bool


class InstanceRecord(TypedDict):
    """One instance over one episode (``InstanceResult.to_dict``)."""

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


class _EpisodeFields(TypedDict):

    name: str
    frames: int
    success: bool | None
    success_seen: bool
    instances: list[InstanceRecord]
    warnings: list[str]
    predicates: dict[str, dict[str, list[list[int]]]]
    verdicts: dict[str, list[list[int]]]


class EpisodeRecord(_EpisodeFields, total=False):
    """One episode of a source, as the engine stores it; ``timeline_svg``:
    its report timeline, drawn by the worker when the episode has a
    violation (``report.predrawn_timelines``).  In the results of
    ``run_audit(detach_timelines=True)``, ``predicates``, ``verdicts`` and
    ``timeline_svg`` are :class:`~.stored.StoredField` references into the
    stored file instead (read with :func:`~.stored.resolved`)."""

    timeline_svg: str


class SourceResult(TypedDict):
    """``OUT/episodes/<name>.json``: one source's episodes and the key it was computed under."""

    source: str
    episodes: list[EpisodeRecord]
    key: str


class Clusters(TypedDict):
    violations: list[int]
    triggers: list[int]


class GroupStats(TypedDict):
    """Aggregates of a property or category (SEMANTICS.md §5), with intervals."""

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
    clusters: Clusters


class TaskSuccess(TypedDict):
    reduction: str | None
    predicate: str | None
    rate: float | None
    rate_ci: tuple[float, float] | None
    safe_success_rate: float | None
    safe_success_rate_ci: tuple[float, float] | None
    warning: str | None


class Report(TypedDict):
    """``report.json``."""

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
    properties: dict[str, dict[str, Any]]      # GroupStats + category, unknown_flagged
    categories: dict[str, GroupStats]
    policies: list[dict[str, Any]]
    horizons: list[dict[str, Any]]
    episodes: list[dict[str, Any]]
    skipped: list[dict[str, str]]
    unsupported: dict[str, list[str]]          # instance → predicates nothing grounds (not run)


_REQUIRED = {'version': int, 'rollouts': int, 'properties': dict, 'categories': dict, 'skipped': list}


def check_report(data: object, where: str) -> Report:
    """``data`` (decoded JSON) as a :class:`Report`, or an error naming what is wrong."""
    if not isinstance(data, dict):
        raise SafemanipError(f'{where}: not an audit report (a JSON object is expected)')
    missing = [k for k, t in _REQUIRED.items() if not isinstance(data.get(k), t) or isinstance(data.get(k), bool)]
    if missing:
        raise SafemanipError(f'{where}: not an audit report (no valid {", ".join(missing)}); '
                             f'give the report.json written by safemanip audit')
    if data['version'] != REPORT_VERSION:
        raise SafemanipError(f'{where}: report version {data["version"]}, this safemanip reads version '
                             f'{REPORT_VERSION}: audit again')
    return data  # type: ignore[return-value]
