"""Episodes to audit, from recorded bags and from trace files.

* **rosbag2 bags** (MCAP or SQLite3, read with rosbags) holding grounded
  predicate topics (``safemanip_ros/msg/PredicateArray``, any topic name).
  Frames are rebuilt at ``rate_hz`` in *bag time* with the same
  sample-and-hold rule as the live monitor node
  (:class:`~safemanip_ros.monitor.frames.SampleHold`).  A bag is one episode,
  unless it has an ``/episode`` topic (``std_msgs/msg/String``): each message
  there starts a new episode named by its text.
* **JSONL traces**: ``safemanip monitor-trace`` frames (one object per line,
  predicate → true/false/null; one episode per file), SpecRLBench steps (one
  list of true propositions per line; one episode per file) or batches (one
  JSON array of steps per line; one episode per line).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import SafemanipError
from ..monitor.frames import SampleHold
from .types import typestore

PREDICATE_TYPE = 'safemanip_ros/msg/PredicateArray'
EPISODE_TOPIC = '/episode'


class AuditInputError(SafemanipError):
    """An input that cannot be audited (names the file and the reason)."""


@dataclass
class Episode:
    source: str
    name: str
    values: np.ndarray       # bool[T, P]
    unknown: np.ndarray      # bool[T, P]


def is_bag(path: Path) -> bool:
    return path.is_dir() and (path / 'metadata.yaml').is_file()


def discover(paths: list[str | Path]) -> list[Path]:
    """Bags and .jsonl files named, or found (not recursively into bags) under named folders."""
    out: list[Path] = []
    for p in map(Path, paths):
        if is_bag(p) or (p.is_file() and p.suffix == '.jsonl'):
            out.append(p)
        elif p.is_dir():
            for child in sorted(p.rglob('*')):
                if is_bag(child) or (child.is_file() and child.suffix == '.jsonl' and
                                     not any(is_bag(a) for a in child.parents)):
                    out.append(child)
        else:
            out.append(p)   # reported as unreadable by the engine, with the reason
    return out


def read_bag(path: Path, predicates: list[str], rate_hz: float, staleness_s: float, robot=None) -> list[Episode]:
    """Episodes of a bag of predicate topics, or — given a robot configuration
    (:class:`~safemanip_ros.grounding.config.RobotConfig`) — of raw inputs
    grounded offline (:mod:`safemanip_ros.audit.grounded`)."""
    from rosbags.rosbag2 import Reader

    ts = typestore()
    try:
        reader = Reader(path)
        reader.open()
    except Exception as err:    # rosbags raises several error types for broken bags
        raise AuditInputError(f'{path}: unreadable bag: {err}') from err
    try:
        conns = [c for c in reader.connections if c.msgtype == PREDICATE_TYPE]
        grounding = None
        if not conns:
            from .grounded import RAW_TOPICS, OfflineGrounding
            raw = [c for c in reader.connections if RAW_TOPICS.get(c.topic) == c.msgtype]
            topics = sorted(f'{c.topic} ({c.msgtype})' for c in reader.connections)
            if not raw or robot is None:
                need = (f'predicate topics ({PREDICATE_TYPE})' if robot is None else
                        f'predicate topics ({PREDICATE_TYPE}) or raw inputs ({", ".join(RAW_TOPICS)})')
                raise AuditInputError(f'{path}: no {need}; the bag has: {", ".join(topics) or "no topics"}'
                                      + ('' if robot is not None or not raw else
                                         ' (raw inputs need --config ROBOT.yaml to be grounded)'))
            conns = raw
            grounding = OfflineGrounding(robot, any(c.topic == '/wrench' for c in raw),
                                         any(c.topic == '/image' for c in raw))
        episode_conns = [c for c in reader.connections if c.topic == EPISODE_TOPIC]
        period_ns = int(1e9 / rate_hz)
        episodes: list[Episode] = []
        hold = SampleHold(predicates, staleness_s)
        name = path.name
        rows_v: list[np.ndarray] = []
        rows_u: list[np.ndarray] = []
        next_frame: int | None = None

        def close(current: str) -> None:
            if rows_v:
                episodes.append(Episode(str(path), current, np.array(rows_v), np.array(rows_u)))

        def emit(frame_ns: int) -> None:
            """Append the frame at ``frame_ns`` (grounding raw inputs first)."""
            now_s = frame_ns * 1e-9
            if grounding is not None:
                for pname, value in grounding.evaluate(now_s).items():
                    hold.update(pname, value, now_s)
            v, u = hold.frame(now_s)
            rows_v.append(v)
            rows_u.append(u)

        try:
            for conn, stamp_ns, raw in reader.messages(connections=conns + episode_conns):
                if next_frame is None:
                    next_frame = stamp_ns
                while stamp_ns > next_frame:      # frames strictly before this message
                    emit(next_frame)
                    next_frame += period_ns
                msg = ts.deserialize_cdr(raw, conn.msgtype)
                if conn.topic == EPISODE_TOPIC:
                    close(name)
                    rows_v, rows_u = [], []
                    name = msg.data or f'{path.name}#{len(episodes)}'
                    hold = SampleHold(predicates, staleness_s)
                    if grounding is not None:
                        grounding = grounding.fresh_copy()
                    next_frame = stamp_ns
                    continue
                if grounding is not None:
                    grounding.feed(conn.topic, msg)
                    continue
                preds = msg.predicates
                hold.update_many([p.name for p in preds], [p.value for p in preds], [p.unknown for p in preds],
                                 stamp_ns * 1e-9)
        except AuditInputError:
            raise
        except Exception as err:
            raise AuditInputError(f'{path}: corrupt or truncated bag: {err}') from err
        if next_frame is not None:          # the frame holding the last messages
            emit(next_frame)
        close(name)
        return episodes
    finally:
        reader.close()


def read_jsonl(path: Path, predicates: list[str], allow_unknown: bool = False) -> list[Episode]:
    """Episodes of a trace file (:mod:`safemanip_ros.ltlf.trace`: the same
    rules as ``check`` and ``monitor-trace``): one per file, or one per line
    of a batch."""
    from ..errors import TraceError
    from ..monitor.frames import trace_matrix
    from ..ltlf.trace import read_traces
    try:
        traces = read_traces(path, predicates, allow_unknown)
    except TraceError as err:
        raise AuditInputError(err.one_line()) from err
    return [Episode(str(path), t.name, *trace_matrix(t, predicates)) for t in traces]
