"""The one producer of an audited source's records (``audit.schema``): a
monitored rollout becomes an :class:`~.schema.RolloutRecord`, a source's
rollouts a :class:`~.schema.SourceResult`.

The engine decides *what* is monitored and where results are stored; what a
record holds is decided here and described in ``schema.py``.  The report
(``report.py``) aggregates these records and nothing else: a field added to
a rollout's record is added here, typed there, and read where it is shown.
"""

from __future__ import annotations

import numpy as np

from ..monitor.core import RolloutResult
from .report import timeline_fields, timeline_svg
from .rollouts import Rollout
from .schema import InstanceRecord, RolloutRecord, SourceResult


def rollout_record(rollout: Rollout, result: RolloutResult, predicates: list[str],
                   success: tuple[bool | None, bool]) -> RolloutRecord:
    """One monitored rollout as its record: the metrics of every instance
    (by the report's field names, :meth:`InstanceResult.to_dict`), task
    ``success`` as (outcome, whether its predicate was ever known), the
    rollout's warnings, and the runs a timeline is drawn from.  A rollout
    with a violation also carries its timeline, drawn here (by the worker
    that monitored it) so report.html does not draw thousands afterwards."""
    instances: list[InstanceRecord] = [r.to_dict() for r in result.instances]  # type: ignore[misc]
    record: RolloutRecord = {
        'name': rollout.name, 'frames': result.frames, 'success': success[0], 'success_seen': success[1],
        'instances': instances, 'warnings': list(rollout.warnings),
        'predicates': predicate_intervals(rollout, result, predicates), 'verdicts': verdict_runs(result)}
    fields = timeline_fields(record)
    if fields['timeline']:      # report.html's default: a timeline for each rollout with a violation
        record['timeline_svg'] = timeline_svg(fields)
    return record


def source_result(source: str, rollouts: list[RolloutRecord]) -> SourceResult:
    """A source's result before it is stored (the store adds its ``key``)."""
    return {'source': source, 'episodes': rollouts}


def task_success(rollout: Rollout, column: int, reduction: str) -> tuple[bool | None, bool]:
    """(task success of ``rollout`` read from predicate ``column`` under
    ``reduction`` — ``any`` frame or the ``final`` one —, whether that
    predicate was known on any frame: a name that never appears is not a
    failed task but a configuration error the report must show)."""
    known = ~rollout.unknown[:, column]
    col = rollout.values[:, column] & known
    seen = bool(known.any())
    if reduction == 'any':
        return bool(col.any()), seen
    return (bool(col[-1]) if col.size else False), seen


def predicate_intervals(rollout: Rollout, result: RolloutResult,
                        predicates: list[str]) -> dict[str, dict[str, list[list[int]]]]:
    """For the timelines: the [start, end] frame runs (inclusive) where each
    grounded predicate read by a violated instance was true, and where it was
    unknown."""
    wanted = sorted({p for r in result.instances if r.violations for p in r.unknown_frames})
    if not wanted:
        return {}
    cols = [predicates.index(name) for name in wanted]
    unknown = rollout.unknown[:, cols]
    true_runs = _runs(rollout.values[:, cols] & ~unknown)
    unknown_runs = _runs(unknown)
    return {name: {'true': t, 'unknown': u} for name, t, u in zip(wanted, true_runs, unknown_runs)}


def verdict_runs(result: RolloutResult) -> dict[str, list[list[int]]]:
    """For the timelines: [start, end, verdict code] runs of the main verdict
    of each instance that was violated."""
    which = [d for d, r in enumerate(result.instances) if r.violations]
    if not which or result.verdicts is None or not result.verdicts.shape[0]:
        return {result.instances[d].instance: [] for d in which}
    v = result.verdicts[:, which].T                  # [instances, T]
    change = np.ones((len(which), v.shape[1]), bool)
    change[:, 1:] = v[:, 1:] != v[:, :-1]            # a run starts at 0 and wherever the verdict changes
    rows, starts = np.nonzero(change)
    ends = np.empty_like(starts)
    ends[:-1] = starts[1:] - 1
    last = np.append(rows[1:] != rows[:-1], True)    # a row's last run ends at its last frame
    ends[last] = v.shape[1] - 1
    runs = np.stack([starts, ends, v[rows, starts].astype(np.int64)], axis=1).tolist()
    bounds = np.searchsorted(rows, np.arange(len(which) + 1)).tolist()
    return {result.instances[d].instance: runs[bounds[k]:bounds[k + 1]] for k, d in enumerate(which)}


def _runs(series: np.ndarray) -> list[list[list[int]]]:
    """Per column of ``bool[T, K]``: its [start, end] runs of trues (inclusive)."""
    T, K = series.shape
    padded = np.zeros((K, T + 2), np.int8)
    padded[:, 1:-1] = series.T
    rows, edges = np.nonzero(np.diff(padded, axis=1))   # per row: rising, falling, rising, ...
    runs = np.stack([edges[0::2], edges[1::2] - 1], axis=1).tolist()
    bounds = np.searchsorted(rows[0::2], np.arange(K + 1)).tolist()
    return [runs[bounds[k]:bounds[k + 1]] for k in range(K)]
