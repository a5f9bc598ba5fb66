"""A recording of the stack, converted into what Foxglove is sent live.

``safemanip bag foxglove BAG --out FILE.mcap`` reads the stack's topics
from a rosbag2 recording (the recorder's, or ``ros2 bag record``'s) in bag
order and writes the Foxglove channels (:data:`~.server.CHANNELS`) to an
MCAP file through the same :class:`~.view.StackView` the live server uses:
it opens in Foxglove with the shipped layout, verdict timelines, events,
holds and markers as they were live.  The recorder's own bag opens in
Foxglove too (our message definitions are embedded), but with ROS message
types the layout's panels do not read.  No rclpy.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..bag import OpenBag, open_bag
from .server import make_channels, sdk
from .tf_relay import TF_TYPE
from .view import KIND_OF_TYPE, RESEND_EVERY_NS, TF_EVERY_NS, StackView

__all__ = ['Item', 'bag_items', 'recording_to_mcap', 'write_mcap']


Item = tuple[int, str, Any]
"""One input of :func:`write_mcap`: (time ns, kind, payload): kind ``tf`` or
``tf_static`` with a serialized TFMessage, or a kind of
:data:`~.view.KIND_OF_TYPE` with its message serialized (bytes) or decoded."""


def recording_to_mcap(bag_path: Path, out: Path, view: StackView) -> Counter[str]:
    """Write the Foxglove channels of the recording ``bag_path`` to ``out``
    (a new file) through ``view`` (:meth:`StackView.of_robot`); the
    messages written per topic.  Each is logged at its bag time (its own
    stamp is in the message)."""
    with open_bag(bag_path) as bag:
        return write_mcap(out, view, bag_items(bag, stack=True))


def bag_items(bag: OpenBag, stack: bool) -> Iterator[Item]:
    """A bag's TF (and, with ``stack``, the stack's topics) as :data:`Item`\\ s, in bag order."""
    conns = [c for c in bag.connections if (stack and c.msgtype in KIND_OF_TYPE) or c.msgtype == TF_TYPE]
    for conn, bag_ns, raw in bag.messages(conns):
        if conn.msgtype == TF_TYPE:
            yield bag_ns, 'tf_static' if conn.topic.rstrip('/').endswith('tf_static') else 'tf', raw
        else:
            yield bag_ns, KIND_OF_TYPE[conn.msgtype], raw


def write_mcap(out: Path, view: StackView, items: Iterable[Item]) -> Counter[str]:
    """Write what Foxglove is sent of ``items`` (in time order) to ``out``
    (a new file), TF as each link's newest pose every
    :data:`~.view.TF_EVERY_NS` and the markers and static TF again every
    :data:`~.view.RESEND_EVERY_NS`, as the live server paces them; the
    messages written per topic."""
    foxglove = sdk()
    context = foxglove.Context()
    channels = make_channels(context)
    written: Counter[str] = Counter()
    writer = foxglove.open_mcap(str(out), allow_overwrite=False, context=context)
    try:
        next_tf_ns = next_markers_ns = None
        for at_ns, kind, payload in items:
            if kind in ('tf', 'tf_static'):
                view.tf.add(payload, static=kind == 'tf_static')
                messages = []
            elif isinstance(payload, bytes):
                messages = view.take(kind, payload)
            else:
                messages = view.take_message(kind, payload)
            if next_tf_ns is None or at_ns >= next_tf_ns:
                resend = next_markers_ns is None or at_ns >= next_markers_ns
                messages += view.transforms(at_ns, with_static=resend)
                if resend:
                    messages += view.markers(at_ns)
                    next_markers_ns = at_ns + RESEND_EVERY_NS
                next_tf_ns = at_ns + TF_EVERY_NS
            for topic, message, _ in messages:
                channels[topic].log(message, log_time=at_ns)
                written[topic] += 1
    finally:
        writer.close()
    return written
