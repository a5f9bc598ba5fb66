"""An audited rollout in Foxglove: the audit's own verdicts beside the recording's TF.

``safemanip audit ... --foxglove DIR`` writes, for each source with a
violation, one MCAP file that opens in Foxglove with the shipped layout: the
audit monitors the source again (:func:`~safemanip_ros.audit.engine.monitored_rollouts`:
the same frames, the same verdicts as the report), and each frame becomes
the message the live monitor would have published for it — a
``VerdictArray`` of every instance, a ``ViolationEvent`` per opening and
closing — handed to the same :class:`~.view.StackView` the live server and
``safemanip bag foxglove`` use, merged in time with the recording's TF.
So the verdict timelines, the event log and the objects lit in the 3D view
are those of the report, on the robot as it moved.

What the audit does not keep is said, not guessed: the recovery verdict of
a violated instance (``recovery_verdict`` reads ``unknown(255)``).  A trace
(.jsonl) has no clock: its frames are placed one period apart from 0.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..bag import is_bag, open_bag
from ..monitor.clock import period_ns_of
from ..monitor.core import RolloutResult
from .recording import Item, bag_items, write_mcap
from .scene import SEVERITIES
from .view import StackView

if TYPE_CHECKING:
    from ..audit.engine import AuditConfig
    from ..audit.rollouts import Rollout
    from ..spec.suite import Instance

__all__ = ['NOT_KEPT', 'audit_to_mcap', 'rollout_items']

NOT_KEPT = 255
"""The verdict code of what the audit does not keep (a violated instance's recovery verdict)."""


def audit_to_mcap(source: Path, out: Path, cfg: AuditConfig, view: StackView) -> Counter[str]:
    """Monitor ``source`` (a bag or a trace) as the audit ``cfg`` does and
    write its rollouts' verdicts and events, with the bag's TF, to ``out``
    (a new MCAP file) through ``view``; the messages written per topic.
    Bad input raises the audit's own errors, naming the source."""
    from ..audit.engine import monitored_rollouts
    instances, monitored = monitored_rollouts(str(source), cfg)
    period_ns = period_ns_of(cfg.rate_hz)
    streams = [rollout_items(view, instances, rollout, result, period_ns) for rollout, result in monitored]
    verdicts = heapq.merge(*streams, key=lambda item: item[0])
    if not is_bag(source):
        return write_mcap(out, view, verdicts)
    with open_bag(source) as bag:
        return write_mcap(out, view, heapq.merge(verdicts, bag_items(bag, stack=False), key=lambda item: item[0]))


def rollout_items(view: StackView, instances: Sequence[Instance], rollout: Rollout, result: RolloutResult,
                  period_ns: int) -> Iterator[Item]:
    """One audited rollout as the live monitor's messages, in time order:
    per frame its ``VerdictArray`` (every instance), before it the events
    its frame opened or closed, and a violation episode still open at the end as
    ``pending_at_end`` on the last frame."""
    T = result.frames
    times = rollout.frame_ns if rollout.frame_ns is not None else np.arange(T, dtype=np.int64) * period_ns
    assert result.verdicts is not None, 'monitored with keep_verdicts (audit.engine.monitored_rollouts)'
    event_class, time_class = view.message_class('violations'), view.store.types['builtin_interfaces/msg/Time']
    header_class, kv_class = view.store.types['std_msgs/msg/Header'], view.store.types['diagnostic_msgs/msg/KeyValue']
    array_class, verdict_class = view.message_class('verdicts'), view.store.types['safemanip_ros/msg/Verdict']
    modes = np.full((T, len(instances)), verdict_class.MODE_WATCHING, np.uint8)
    events: dict[int, list[Any]] = {}

    def stamp(frame: int) -> Any:
        sec, nanosec = divmod(int(times[frame]), 1_000_000_000)
        return time_class(sec=sec, nanosec=nanosec)

    for d, (inst, res) in enumerate(zip(instances, result.instances)):
        binding = [kv_class(key=k, value=v) for k, v in inst.binding]
        for count, e in enumerate(res.episodes, start=1):
            last = e.end if e.recovered else T - 1
            modes[e.start:e.end if e.recovered else T, d] = verdict_class.MODE_VIOLATED
            for kind, frame in ((event_class.EVENT_OPENED, e.start),
                                (event_class.EVENT_CLOSED if e.recovered else event_class.EVENT_PENDING_AT_END, last)):
                events.setdefault(frame, []).append(event_class(
                    header=header_class(stamp=stamp(frame), frame_id=''), event=kind, property=inst.property,
                    instance=inst.instance, binding=binding, category=inst.category,
                    severity=SEVERITIES.index(inst.severity), episode_id=rollout.name, start_frame=e.start,
                    end_frame=frame, start_stamp=stamp(e.start), end_stamp=stamp(frame), recovered=e.recovered,
                    count=count))
    names = [(inst.property, inst.instance) for inst in instances]
    for t in range(T):
        for e in events.get(t, ()):
            yield int(times[t]), 'violations', e
        rows = result.verdicts[t].tolist()
        mode_row = modes[t].tolist()
        yield int(times[t]), 'verdicts', array_class(
            header=header_class(stamp=stamp(t), frame_id=''), frame=t, episode_id=rollout.name,
            verdicts=[verdict_class(property=p, instance=i, frame=t, verdict=v, mode=m,
                                    recovery_verdict=NOT_KEPT if m == verdict_class.MODE_VIOLATED
                                    else verdict_class.VERDICT_PRESUMABLY_FALSE)
                      for (p, i), v, m in zip(names, rows, mode_row)])
