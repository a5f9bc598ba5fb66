"""The stack's ROS messages, serialized, to what Foxglove is sent: one path
for the live server and for a recording converted to MCAP.

:class:`StackView` takes each message as the CDR bytes a subscription or a
bag holds (decoded with rosbags' typestore, so it needs no rclpy), keeps
what the panels need across messages (every instance's verdict, the open
violations and the hold for the 3D markers, TF as each link's newest pose)
and returns ``(topic, JSON message, log time ns)`` for the channels of
:data:`~.server.CHANNELS`.  The live node hands it what its subscriptions
take; ``safemanip bag foxglove`` what a recording holds, in bag order.

Example (a recording's kinds, by message type)::

    >>> KIND_OF_TYPE['safemanip_ros/msg/VerdictArray']
    'verdicts'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..bag.typestore import typestore
from ..monitor.board import VerdictBoard
from ..stamps import stamp_ns as stamp_to_ns
from .robot import RobotFigure
from .scene import (
    EventRecord,
    GateRecord,
    ViolationScene,
    action_json,
    diagnostics_json,
    event_json,
    event_line,
    frame_transforms,
    gate_json,
    log_json,
    time_json,
    verdicts_json,
)
from .server import Message
from .tf_relay import TfRelay

if TYPE_CHECKING:
    from ..grounding.config import RobotConfig

__all__ = ['HOLDING', 'KIND_OF_TYPE', 'RESEND_EVERY_NS', 'TF_EVERY_NS', 'StackView']

TF_EVERY_NS = 50_000_000
"""TF is sent as each link's newest pose this often (Foxglove's 3D view; a robot may publish far faster),
live on the node's clock, from a recording in bag time."""
RESEND_EVERY_NS = 1_000_000_000
"""The 3D markers and the static TF are sent again this often: a client that connects late, or a seek in a
recording, finds them."""

KIND_OF_TYPE = {
    'safemanip_ros/msg/VerdictArray': 'verdicts',
    'safemanip_ros/msg/ViolationEvent': 'violations',
    'safemanip_ros/msg/SupervisorAction': 'supervisor_actions',
    'safemanip_ros/msg/GateDecision': 'gate',
    'diagnostic_msgs/msg/DiagnosticArray': 'diagnostics',
}
"""The message types the view takes (TF goes to :attr:`StackView.tf`), and the kind each is."""
_TYPE_OF_KIND = {kind: msgtype for msgtype, kind in KIND_OF_TYPE.items()}
HOLDING = (2, 3, 4)
"""Supervisor actions that hold the arm: pause, retract, stop (``SupervisorAction``'s codes)."""
RESUME = 5


class StackView:
    """What Foxglove is sent, from the stack's messages (module docstring).
    ``scene``: the 3D markers' objects (:meth:`ViolationScene.of_robot`);
    ``figure``: the robot and its scene drawn from TF (:class:`~.robot.RobotFigure`), or none."""

    def __init__(self, scene: ViolationScene, figure: RobotFigure | None = None) -> None:
        self.store = typestore()
        self.board = VerdictBoard()
        self.scene = scene
        self.figure = figure
        self.tf = TfRelay()
        self.held = False

    @classmethod
    def of_robot(cls, robot: RobotConfig | None) -> StackView:
        """The view of a robot configuration's stack (markers on its objects, its arm drawn); of any stack
        without one (no markers, no arm)."""
        if robot is None:
            return cls(ViolationScene({}, {}, ''))
        return cls(ViolationScene.of_robot(robot), RobotFigure.of_robot(robot))

    def take(self, kind: str, raw: bytes) -> list[Message]:
        """The messages for one serialized message of ``kind`` (a value of :data:`KIND_OF_TYPE`)."""
        return self.take_message(kind, self.store.deserialize_cdr(raw, _TYPE_OF_KIND[kind]))

    def take_message(self, kind: str, msg: Any) -> list[Message]:
        """The messages for one message of ``kind``, decoded (the typestore's
        class of its type, or any object with its fields)."""
        out: list[Message] = getattr(self, f'_{kind}')(msg)
        return out

    def message_class(self, kind: str) -> Any:
        """The typestore's class of ``kind``'s message type (to make one)."""
        return self.store.types[_TYPE_OF_KIND[kind]]

    def _verdicts(self, m: Any) -> list[Message]:
        stamp_ns = stamp_to_ns(m.header.stamp)
        self.board.update(m)
        return [('/safemanip/verdicts', verdicts_json(self.board, stamp_ns, int(m.frame)), stamp_ns)]

    def _violations(self, m: Any) -> list[Message]:
        e = EventRecord(stamp_to_ns(m.header.stamp), int(m.event), m.property, m.instance,
                        tuple((kv.key, kv.value) for kv in m.binding), m.category, int(m.severity), m.episode_id,
                        int(m.start_frame), int(m.end_frame), bool(m.recovered), int(m.count))
        self.scene.event(e)
        level = 'info' if e.event != 0 else ('warning', 'warning', 'error', 'critical')[min(e.severity, 3)]
        return [('/safemanip/violations', event_json(e), e.stamp_ns),
                ('/safemanip/log', log_json(e.stamp_ns, level, event_line(e), 'monitor'), e.stamp_ns),
                ('/safemanip/markers', self.scene.update(e.stamp_ns), e.stamp_ns)]

    def _supervisor_actions(self, m: Any) -> list[Message]:
        stamp_ns, action = stamp_to_ns(m.header.stamp), int(m.action)
        said = action_json(stamp_ns, action, m.property, m.instance, m.reason, int(m.frame), bool(m.success))
        out: list[Message] = [
            ('/safemanip/supervisor', said, stamp_ns),
            ('/safemanip/log', log_json(stamp_ns, 'warning' if action in HOLDING else 'info',
                                        f'supervisor: {said["action"]}: {m.reason}', 'supervisor'), stamp_ns)]
        if action in HOLDING or action == RESUME:
            self.held = action in HOLDING
            self.scene.hold(self.held)
            out.append(('/safemanip/hold', {'timestamp': time_json(stamp_ns), 'held': self.held,
                                            'state': said['action'] if self.held else 'released',
                                            'reason': m.reason}, stamp_ns))
            out.append(('/safemanip/markers', self.scene.update(stamp_ns), stamp_ns))
        return out

    def _gate(self, m: Any) -> list[Message]:
        g = GateRecord(stamp_to_ns(m.header.stamp), m.name, m.robot, m.unit, float(m.limit), float(m.alpha),
                       int(m.decision), int(m.observations), int(m.violations), int(m.rollouts),
                       int(m.decided_after))
        return [('/safemanip/gate', gate_json(g), g.stamp_ns)]

    def _diagnostics(self, m: Any) -> list[Message]:
        stamp_ns = stamp_to_ns(m.header.stamp)
        return [('/diagnostics', diagnostics_json(stamp_ns, [
            (int.from_bytes(s.level, 'little') if isinstance(s.level, bytes) else int(s.level), s.name, s.message,
             s.hardware_id, [(kv.key, kv.value) for kv in s.values]) for s in m.status]), stamp_ns)]

    def markers(self, now_ns: int) -> list[Message]:
        """The 3D markers now (sent again now and then: a client that connects late sees what is open)."""
        return [('/safemanip/markers', self.scene.update(now_ns), now_ns)]

    def transforms(self, now_ns: int, with_static: bool = False) -> list[Message]:
        """TF since the last call, as each link's newest pose (:class:`~.tf_relay.TfRelay`), and the robot
        drawn where it now is (``/safemanip/robot``)."""
        batch = self.tf.take(with_static)
        if not batch:
            return []
        out: list[Message] = [('/tf', frame_transforms(batch), now_ns)]
        if self.figure is not None:
            out.append(('/safemanip/robot', self.figure.update(batch, now_ns), now_ns))
        return out
