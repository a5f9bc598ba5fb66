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
from pathlib import Path

from ..bag import open_bag
from .server import make_channels, sdk
from .tf_relay import TF_TYPE
from .view import KIND_OF_TYPE, RESEND_EVERY_NS, TF_EVERY_NS, StackView

__all__ = ['recording_to_mcap']


def recording_to_mcap(bag_path: Path, out: Path, view: StackView) -> Counter[str]:
    """Write the Foxglove channels of the recording ``bag_path`` to ``out``
    (a new file) through ``view`` (:meth:`StackView.of_robot`); the
    messages written per topic.  Each is logged at its bag time (its own
    stamp is in the message)."""
    foxglove = sdk()
    context = foxglove.Context()
    channels = make_channels(context)
    written: Counter[str] = Counter()
    writer = foxglove.open_mcap(str(out), allow_overwrite=False, context=context)
    try:
        with open_bag(bag_path) as bag:
            conns = [c for c in bag.connections if c.msgtype in KIND_OF_TYPE or c.msgtype == TF_TYPE]
            next_tf_ns = next_markers_ns = None
            for conn, bag_ns, raw in bag.messages(conns):
                if conn.msgtype == TF_TYPE:
                    view.tf.add(raw, static=conn.topic.rstrip('/').endswith('tf_static'))
                    messages = []
                else:
                    messages = view.take(KIND_OF_TYPE[conn.msgtype], raw)
                if next_tf_ns is None or bag_ns >= next_tf_ns:
                    resend = next_markers_ns is None or bag_ns >= next_markers_ns
                    messages += view.transforms(bag_ns, with_static=resend)
                    if resend:
                        messages += view.markers(bag_ns)
                        next_markers_ns = bag_ns + RESEND_EVERY_NS
                    next_tf_ns = bag_ns + TF_EVERY_NS
                for topic, message, _ in messages:
                    channels[topic].log(message, log_time=bag_ns)
                    written[topic] += 1
    finally:
        writer.close()
    return written
