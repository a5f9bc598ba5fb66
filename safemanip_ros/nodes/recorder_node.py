"""``recorder``: records the monitoring topics to a rosbag2 bag, off the
control path.  A lifecycle node around
:class:`safemanip_ros.bag.recorder.ThreadedRecorder`.

Subscriptions are raw (serialized bytes) and only enqueue; a thread writes
the bag (``bag_storage``: mcap or sqlite3) in ``split_s`` splits and rotates
them, so recording never delays grounding, monitor or supervisor, even in
one process (``safemanip run``).  A full queue (``queue_size`` messages)
drops and counts; the count is logged and published in the bag's custom data
at close.  Closing (deactivate, shutdown, SIGINT/SIGTERM) lists every split
in ``metadata.yaml``; SIGKILL loses at most the open split.

Parameters: ``bag_path`` (default ``bags/safemanip_<time>``), ``bag_storage``,
``split_s`` (0.75), ``queue_size`` (10000), ``record_topics``
(``topic:package/msg/Type``), ``record_raw_inputs`` (also joint states, TF,
contacts), ``suite`` and ``config`` (written to the bag's custom data),
``autostart``.
"""

from __future__ import annotations

import functools
import os
import select
import sys
import time
from typing import Any

from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn

from ..bag.recorder import ThreadedRecorder
from ..bag.writer import SplitBagWriter
from ..errors import SafemanipError
from ..settings import RECORDER, named
from .conversions import message_class
from .guard import CallbackGuard
from .params import RosParameters, check_setting, declare_settings
from .qos import RECORDED_EVENTS, RECORDING, STATIC_TF
from .recorder_process import MATCHED_PREFIX, READY_ENV, READY_PREFIX
from .runner import autostarted, run_node, take_delivered, transition_failed

RAW_INPUTS = ['joint_states:sensor_msgs/msg/JointState', '/tf:tf2_msgs/msg/TFMessage',
              '/tf_static:tf2_msgs/msg/TFMessage', 'contacts:safemanip_ros/msg/ContactArray']


def _skill_topics(config: str, specs: list[str]) -> list[str]:
    """The robot configuration's skill-event topic, when it has one: always
    recorded (sparse, and it decides onsets an audit must replay)."""
    if not config:
        return []
    from ..grounding.config import load_robot_config
    from ..grounding.messages import SKILL_EVENT_TYPE
    topic = load_robot_config(config).skills.topic     # its SpecError fails the configure step
    spec = f'{topic}:{SKILL_EVENT_TYPE}'
    return [spec] if topic and spec not in specs else []


class RecorderNode(RosParameters, CallbackGuard, LifecycleNode):
    def __init__(self) -> None:
        super().__init__('recorder')
        declare_settings(self, RECORDER)
        self.recorder: ThreadedRecorder | None = None
        self._recorded: list[tuple[Any, str]] = []     # (subscription, resolved topic)
        self._active = False

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        p = self.get_parameter
        path = p('bag_path').value or time.strftime('bags/safemanip_%Y%m%d_%H%M%S')
        try:
            split_s = float(check_setting(self, named(RECORDER, 'split_s')))
            queue_size = int(check_setting(self, named(RECORDER, 'queue_size')))
            writer = SplitBagWriter(path, p('bag_storage').value, split_s,
                                    {'suite': p('suite').value, 'config': p('config').value,
                                     'recorder': 'safemanip_ros recorder'})
            specs = list(p('record_topics').value) + (RAW_INPUTS if p('record_raw_inputs').value else [])
            specs += _skill_topics(p('config').value, specs)
            subscriptions = []
            for spec in specs:
                topic, _, msgtype = spec.rpartition(':')
                if not topic or msgtype.count('/') != 2:
                    raise SafemanipError(f'record_topics entry {spec!r}: expected topic:package/msg/Type')
                try:
                    cls = message_class(msgtype)
                except SafemanipError as err:
                    raise SafemanipError(f'record_topics entry {spec!r}: {err}') from err
                resolved = self.resolve_topic_name(topic)
                writer.add_topic(resolved, msgtype)
                subscriptions.append((cls, topic, resolved))
        except SafemanipError as err:
            return transition_failed(self, 'configure', f'{err.one_line()}')
        self.recorder = ThreadedRecorder(writer, queue_size,
                                         now_ns=lambda: self.get_clock().now().nanoseconds).start()
        for cls, topic, resolved in subscriptions:
            # Event topics are published transient-local by our nodes: recorded even when
            # the event came before this subscription matched (a busy start-up).
            qos = STATIC_TF if resolved == '/tf_static' else \
                RECORDED_EVENTS if resolved in ('/violations', '/supervisor_actions') else RECORDING
            sub = self.create_subscription(cls, topic, lambda raw, t=resolved: self._record(t, raw), qos, raw=True)
            self._recorded.append((sub, resolved))
        self.get_logger().info(f'recording {len(subscriptions)} topics to {path} ({p("bag_storage").value})')
        return TransitionCallbackReturn.SUCCESS

    def subscriptions_by_topic(self) -> list[tuple[Any, str]]:
        """(subscription, resolved topic) of each recorded topic (none until configured)."""
        return list(self._recorded)

    def _record(self, topic: str, raw: bytes) -> None:
        if self.recorder is not None:
            self.recorder.put(topic, self.get_clock().now().nanoseconds, raw)

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.close_bag()
        return TransitionCallbackReturn.SUCCESS

    def close_bag(self) -> None:
        """Take the messages already delivered to the subscriptions (while
        the context is up: the last moments of a run, its closing violation
        events among them, wait there for an executor turn that will not
        come), write what is queued and close the bag (idempotent)."""
        if self.recorder is not None:
            for sub, topic in self._recorded:
                take_delivered(sub, functools.partial(self._record, topic))
            rec, self.recorder = self.recorder, None
            stats = rec.close()
            text = (f'bag closed: {stats.written} messages written, {stats.dropped} dropped, longest write '
                    f'{stats.max_write_s * 1e3:.1f} ms' + (f', {stats.errors} write errors ({rec.last_error})'
                                                           if stats.errors else ''))
            if stats.dropped or stats.errors:
                self.get_logger().warning(text)
            else:
                self.get_logger().info(text)


def wait_for_publishers(node: RecorderNode, timeout_s: float = 60.0) -> None:
    """For ``safemanip run`` (:mod:`.recorder_process`): say which topics
    are recorded, read the ones the stack publishes (one line on standard
    input), wait until each of those subscriptions has matched a publisher
    (a reader drops what a writer it does not know yet sends), and say so,
    naming any that had none after ``timeout_s``."""
    recorded = node.subscriptions_by_topic()
    print(READY_PREFIX, *(topic for _, topic in recorded), flush=True)
    wanted = set(sys.stdin.readline().split())      # '' when the stack is gone: nothing to wait for
    waited = [(sub, topic) for sub, topic in recorded if topic in wanted]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(sub.get_publisher_count() < 1 for sub, _ in waited):
        if select.select([sys.stdin], [], [], 0.02)[0]:
            break                                     # its standard input closed: the stack is stopping
    print(MATCHED_PREFIX, *sorted(topic for sub, topic in waited if sub.get_publisher_count() < 1), flush=True)


def main(args: list[str] | None = None) -> int:
    def make() -> RecorderNode:
        node = autostarted(RecorderNode)()
        if os.environ.get(READY_ENV):        # started by safemanip run, which waits for this
            wait_for_publishers(node)
        return node
    # Started by safemanip run, it has the stack's arguments, which that process checks.
    return run_node(make, 'recorder', args, on_exit=lambda node: node.close_bag(),
                    claim_parameters=not os.environ.get(READY_ENV))


if __name__ == '__main__':
    sys.exit(main())


__all__ = ['RecorderNode']
