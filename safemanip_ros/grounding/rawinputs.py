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

import numpy as np

from ..bag.bulk import RecordBatch
from ..bag.layouts import Columns, LayoutDecoder
from ..grounding.contacts import ContactSample
from ..grounding.tf import TfTransform

# Where each field sits in a decoded layout: the one place the message fields are named, for the
# samples below (one message at a time, as the live grounding takes them) and for the audit's
# column-wise grounding (audit/grounded.py: whole arrays).

def stamps_s(c: Columns, path: str = 'header.stamp') -> np.ndarray:
    """``int(sec) + int(nanosec) * 1e-9`` per message (:func:`~safemanip_ros.stamps.stamp_s`), [n]."""
    out: np.ndarray = c.numbers[f'{path}.sec'].astype(np.float64) + c.numbers[f'{path}.nanosec'].astype(np.float64) * 1e-9
    return out


def joint_names(c: Columns) -> list[str]:
    """A JointState layout's ``name`` strings."""
    return [c.layout.strings[f'name[{k}]'] for k in range(c.layout.sequence_lengths['name'])]


def joint_positions(c: Columns) -> np.ndarray:
    """``position`` per message, ``[n, len(position)]``."""
    return c.stack([f'position[{k}]' for k in range(c.layout.sequence_lengths['position'])])


def joint_velocities(c: Columns) -> np.ndarray | None:
    """``velocity`` per message, ``[n, len(name)]``; None unless there is one per name."""
    n_vel, names = c.layout.sequence_lengths['velocity'], c.layout.sequence_lengths['name']
    return c.stack([f'velocity[{k}]' for k in range(n_vel)]) if n_vel == names and names else None


def wrench_values(c: Columns) -> np.ndarray:
    """Force then torque (x, y, z each) per message, ``[n, 6]``."""
    return c.stack([f'wrench.{part}.{axis}' for part in ('force', 'torque') for axis in 'xyz'])


def contact_bodies(c: Columns) -> list[tuple[str, str]]:
    """A ContactArray layout's (body1, body2) per contact."""
    lay = c.layout
    return [(lay.strings[f'contacts[{k}].body1'], lay.strings[f'contacts[{k}].body2'])
            for k in range(lay.sequence_lengths['contacts'])]


def contact_forces(c: Columns) -> np.ndarray:
    """``normal_force_n`` per message and contact, ``[n, contacts]``."""
    return c.stack([f'contacts[{k}].normal_force_n' for k in range(c.layout.sequence_lengths['contacts'])])


def tf_links(c: Columns) -> list[tuple[str, str]]:
    """A TFMessage layout's (parent, child) per transform."""
    lay = c.layout
    return [(lay.strings[f'transforms[{k}].header.frame_id'], lay.strings[f'transforms[{k}].child_frame_id'])
            for k in range(lay.sequence_lengths['transforms'])]


def tf_stamps_s(c: Columns) -> np.ndarray:
    """Each transform's stamp per message, ``[n, transforms]`` (as :func:`stamps_s`)."""
    count = c.layout.sequence_lengths['transforms']
    if not count:
        return np.zeros((len(c.rows), 0))
    secs = c.stack([f'transforms[{k}].header.stamp.sec' for k in range(count)]).astype(np.float64)
    nsecs = c.stack([f'transforms[{k}].header.stamp.nanosec' for k in range(count)]).astype(np.float64)
    out: np.ndarray = secs + nsecs * 1e-9
    return out


_TF_FIELDS = ('translation.x', 'translation.y', 'translation.z',
              'rotation.x', 'rotation.y', 'rotation.z', 'rotation.w')


def tf_values(c: Columns) -> np.ndarray:
    """Each transform's translation and quaternion (x, y, z, w) per message, ``[n, transforms, 7]``."""
    count = c.layout.sequence_lengths['transforms']
    if not count:
        return np.zeros((len(c.rows), 0, 7))
    return c.stack([f'transforms[{k}].transform.{f}' for k in range(count) for f in _TF_FIELDS]).reshape(-1, count, 7)


def _joint_states(c: Columns) -> list[Any]:
    names = joint_names(c)
    positions, velocity = joint_positions(c), joint_velocities(c)
    return [(t, list(names), positions[i], None if velocity is None else velocity[i])
            for i, t in enumerate(stamps_s(c).tolist())]


def _transforms(c: Columns) -> list[Any]:
    frames = tf_links(c)
    out = []
    for stamps, v in zip(tf_stamps_s(c).tolist(), tf_values(c).tolist()):
        by_stamp: dict[float, list[TfTransform]] = {}
        for (parent, child), stamp, row in zip(frames, stamps, v):
            by_stamp.setdefault(stamp, []).append((parent, child, (row[0], row[1], row[2]),
                                                   (row[3], row[4], row[5], row[6])))
        out.append(sorted(by_stamp.items()))
    return out


def _contacts(c: Columns) -> list[Any]:
    bodies = contact_bodies(c)
    return [(t, [ContactSample(b1, b2, f) for (b1, b2), f in zip(bodies, row)])
            for t, row in zip(stamps_s(c).tolist(), contact_forces(c).tolist())]


def _wrenches(c: Columns) -> list[Any]:
    return [(t, (r[0], r[1], r[2]), (r[3], r[4], r[5])) for t, r in zip(stamps_s(c).tolist(), wrench_values(c).tolist())]


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
