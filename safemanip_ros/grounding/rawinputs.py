"""Raw input messages of a bag to grounding samples, column-wise.

A bag's ``JointState``, ``TFMessage``, ``ContactArray`` and
``WrenchStamped`` messages are decoded by layout (:mod:`.layouts`) into the
very samples :mod:`safemanip_ros.grounding.messages` builds from a
deserialized message (same types, same values bit for bit:
``test/test_bag_layouts.py``), without building message objects.  A
message no layout takes is left to rosbags (its sample is None here).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..bag.bulk import RecordBatch
from ..bag.layouts import Columns, LayoutDecoder
from ..grounding.contacts import ContactSample
from ..grounding.tf import TfTransform


def _stamps(c: Columns, path: str) -> list[float]:
    """``int(sec) + int(nanosec) * 1e-9`` per message, as ``stamp_s``."""
    return [s + n * 1e-9 for s, n in zip(c.numbers[f'{path}.sec'].tolist(), c.numbers[f'{path}.nanosec'].tolist())]


def _joint_states(c: Columns) -> list[Any]:
    lay = c.layout
    names = [lay.strings[f'name[{k}]'] for k in range(lay.sequence_lengths['name'])]
    positions = c.stack([f'position[{k}]' for k in range(lay.sequence_lengths['position'])])
    n_vel = lay.sequence_lengths['velocity']
    velocity = c.stack([f'velocity[{k}]' for k in range(n_vel)]) if n_vel == len(names) and names else None
    return [(t, list(names), positions[i], None if velocity is None else velocity[i])
            for i, t in enumerate(_stamps(c, 'header.stamp'))]


_TF_FIELDS = ('translation.x', 'translation.y', 'translation.z',
              'rotation.x', 'rotation.y', 'rotation.z', 'rotation.w')


def _transforms(c: Columns) -> list[Any]:
    lay = c.layout
    count = lay.sequence_lengths['transforms']
    frames = [(lay.strings[f'transforms[{k}].header.frame_id'], lay.strings[f'transforms[{k}].child_frame_id'])
              for k in range(count)]
    secs = c.stack([f'transforms[{k}].header.stamp.sec' for k in range(count)]).tolist()
    nsecs = c.stack([f'transforms[{k}].header.stamp.nanosec' for k in range(count)]).tolist()
    values = c.stack([f'transforms[{k}].transform.{f}' for k in range(count) for f in _TF_FIELDS]).tolist()
    out = []
    for sec, nsec, v in zip(secs, nsecs, values):
        by_stamp: dict[float, list[TfTransform]] = {}
        for k, (parent, child) in enumerate(frames):
            b = 7 * k
            by_stamp.setdefault(sec[k] + nsec[k] * 1e-9, []).append(
                (parent, child, (v[b], v[b + 1], v[b + 2]), (v[b + 3], v[b + 4], v[b + 5], v[b + 6])))
        out.append(sorted(by_stamp.items()))
    return out


def _contacts(c: Columns) -> list[Any]:
    lay = c.layout
    count = lay.sequence_lengths['contacts']
    bodies = [(lay.strings[f'contacts[{k}].body1'], lay.strings[f'contacts[{k}].body2']) for k in range(count)]
    forces = c.stack([f'contacts[{k}].normal_force_n' for k in range(count)]).tolist()
    return [(t, [ContactSample(b1, b2, f) for (b1, b2), f in zip(bodies, row)])
            for t, row in zip(_stamps(c, 'header.stamp'), forces)]


def _wrenches(c: Columns) -> list[Any]:
    v = c.stack([f'wrench.{part}.{axis}' for part in ('force', 'torque') for axis in 'xyz']).tolist()
    return [(t, (r[0], r[1], r[2]), (r[3], r[4], r[5])) for t, r in zip(_stamps(c, 'header.stamp'), v)]


BUILDERS: dict[str, Callable[[Columns], list[Any]]] = {
    'sensor_msgs/msg/JointState': _joint_states,
    'tf2_msgs/msg/TFMessage': _transforms,
    'safemanip_ros/msg/ContactArray': _contacts,
    'geometry_msgs/msg/WrenchStamped': _wrenches,
}


class SampleDecoder:
    """Samples of the raw messages of a bag, batch by batch (layouts are
    remembered from batch to batch)."""

    def __init__(self, typestore: Any) -> None:
        self.decoders = {t: LayoutDecoder(typestore, t) for t in BUILDERS}

    def decode(self, batch: RecordBatch, where: str) -> list[Any]:
        """One sample per message of ``batch`` (None: not decoded here)."""
        out: list[Any] = [None] * len(batch)
        by_type: dict[str, list[int]] = {}
        for i, conn in enumerate(batch.connections):
            if conn.msgtype in self.decoders:
                by_type.setdefault(conn.msgtype, []).append(i)
        for msgtype, index in by_type.items():
            columns, _ = self.decoders[msgtype].decode([batch.raws[i] for i in index], where)
            build = BUILDERS[msgtype]
            for c in columns:
                for row, sample in zip(c.rows.tolist(), build(c)):
                    out[index[row]] = sample
        return out
