"""TF for Foxglove: serialized ``tf2_msgs/TFMessage`` in, the newest pose of
each link out, at the server's pace.

A robot publishes TF hundreds of times a second; Foxglove's 3D panel needs
each link's newest pose a few dozen times a second.  The relay keeps the
serialized messages as they arrive (a bounded list: taking one costs the
subscriber nothing), and :meth:`TfRelay.take` decodes all of them at once
by layout (:mod:`safemanip_ros.bag.layouts`, the audit's column decoder:
one numpy pass for a batch) into each link's newest transform.  Static TF is kept and sent again with each
batch it is asked for (a client that connects late sees the whole tree).
A message no layout takes (one the column decoder cannot walk) is decoded
by rosbags, one by one.
"""

from __future__ import annotations

import threading
from typing import Any

from ..bag.layouts import LayoutDecoder
from ..bag.typestore import typestore
from ..grounding.rawinputs import tf_links, tf_stamps_s, tf_values
from ..stamps import stamp_ns
from .scene import TransformRecord

__all__ = ['TF_TYPE', 'TfRelay']

TF_TYPE = 'tf2_msgs/msg/TFMessage'


class TfRelay:
    """Serialized TF messages to Foxglove's newest-pose-per-link batches.
    ``max_waiting``: messages kept between batches (the oldest dropped
    beyond it: only each link's newest pose is sent anyway)."""

    def __init__(self, max_waiting: int = 5000) -> None:
        self._store = typestore()
        self._decoder = LayoutDecoder(self._store, TF_TYPE)
        self._lock = threading.Lock()
        self._waiting: list[bytes] = []
        self._static_waiting: list[bytes] = []
        self.static: dict[str, TransformRecord] = {}       # child frame → its static transform
        self.max_waiting = max_waiting
        self.dropped = 0

    def add(self, raw: bytes, static: bool = False) -> None:
        """A serialized TFMessage as it arrived (any thread)."""
        with self._lock:
            waiting = self._static_waiting if static else self._waiting
            waiting.append(raw)
            if len(waiting) > self.max_waiting:
                del waiting[0]
                self.dropped += 1

    def _records(self, raws: list[bytes]) -> list[TransformRecord]:
        """The transforms of ``raws`` in message order; of the messages of
        one layout (one publisher's links) only the newest, which holds
        the newest pose of each of them."""
        out: list[tuple[int, TransformRecord]] = []
        columns, rejected = self._decoder.decode(raws, 'tf')
        for c in columns:
            last = int(c.rows.argmax())
            links, stamps, values = tf_links(c), tf_stamps_s(c)[last].tolist(), tf_values(c)[last].tolist()
            row = int(c.rows[last])
            for (parent, child), stamp_s, v in zip(links, stamps, values):
                out.append((row, TransformRecord(int(round(stamp_s * 1e9)), parent, child, (v[0], v[1], v[2]),
                                                 (v[3], v[4], v[5], v[6]))))
        for row in rejected.tolist():
            msg: Any = self._store.deserialize_cdr(raws[row], TF_TYPE)
            for t in msg.transforms:
                tr, rot = t.transform.translation, t.transform.rotation
                out.append((row, TransformRecord(stamp_ns(t.header.stamp),
                                                 t.header.frame_id, t.child_frame_id, (tr.x, tr.y, tr.z),
                                                 (rot.x, rot.y, rot.z, rot.w))))
        out.sort(key=lambda x: x[0])
        return [r for _, r in out]

    def take(self, with_static: bool = False) -> list[TransformRecord]:
        """What arrived since the last call: each link's newest transform
        (the static ones too with ``with_static``, or when new ones
        arrived); empty when there is nothing to send
        (:func:`~.scene.frame_transforms` makes the message)."""
        with self._lock:
            raws, self._waiting = self._waiting, []
            statics, self._static_waiting = self._static_waiting, []
        newest: dict[str, TransformRecord] = {}
        if statics:
            for r in self._records(statics):
                self.static[r.child] = r
            with_static = True
        if raws:
            for r in self._records(raws):
                if r.child not in newest or r.stamp_ns >= newest[r.child].stamp_ns:
                    newest[r.child] = r
        return ([*self.static.values()] if with_static else []) + list(newest.values())
