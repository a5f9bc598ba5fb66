"""The stack in Foxglove: a Foxglove WebSocket server beside the monitor.

``safemanip run --foxglove [HOST:]PORT`` (and ``gate --live --foxglove``)
adds this node to the stack's process.  It hears the monitor's verdicts
and violation events, the supervisor's actions, the gate's decisions and
TF, and serves them to Foxglove (:mod:`safemanip_ros.foxglove`): verdict
state timelines, the event log, holds, the gate's evidence, the robot's TF
and 3D markers on the objects an open violation names.

It never slows the control path: its subscriptions take serialized
messages and hand them to the server's own thread, through a bounded
queue that drops and counts rather than waits; decoding and JSON happen
there.  Operator actions (acknowledge, resume, start and end a rollout)
are Foxglove services that call the supervisor's and monitor's own ROS
services, refused to a connection until it logged in with the operator
credential; with no credential configured none is offered.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.node import Node
from std_srvs.srv import Trigger
from tf2_msgs.msg import TFMessage

from safemanip_ros.msg import GateDecision, SupervisorAction, VerdictArray, ViolationEvent

from ..errors import FoxgloveError, SafemanipError
from ..foxglove.operator import OperatorAccess, load_credential
from ..foxglove.scene import time_json
from ..foxglove.server import FoxgloveServer, Message, ServiceSpec, parse_address
from ..foxglove.view import RESEND_EVERY_NS, TF_EVERY_NS, StackView
from ..grounding.config import load_robot_config
from ..settings import FOXGLOVE, named
from .params import RosParameters, check_setting, declare_settings
from .qos import EVENTS, RELIABLE, STATIC_TF, latched
from .runner import run_node

__all__ = ['FoxgloveNode']

CALL_TIMEOUT_S = 5.0
"""The longest an operator action waits for the supervisor's or monitor's answer."""
MAX_RESUME_WAIT_S = 120.0


class FoxgloveNode(RosParameters, Node):
    def __init__(self) -> None:
        super().__init__('foxglove')
        declare_settings(self, FOXGLOVE)
        p = self.get_parameter
        try:
            address = parse_address(str(p('address').value))
            credential_file = str(p('operator_credential_file').value)
            self.access = OperatorAccess(load_credential(credential_file) if credential_file else None)
            queue_size = int(check_setting(self, named(FOXGLOVE, 'send_queue_size')))
            mcap = str(p('mcap_path').value)
        except FoxgloveError as err:
            raise SafemanipError(f'foxglove: {err.one_line()}') from None
        config = str(p('config').value)
        self._supervisor = str(p('supervisor_node').value).rstrip('/')
        self._monitor = str(p('monitor_node').value).rstrip('/')
        self._triggers: dict[str, Any] = {}
        self._client_lock = threading.Lock()
        services = [] if self.access.read_only else self._operator_services()
        self.server = FoxgloveServer(address, services, Path(mcap) if mcap else None, queue_size)
        # What Foxglove is sent, made on the server's thread from the serialized messages (one path with
        # `safemanip bag foxglove`, which converts a recording).
        self.view = StackView.of_robot(load_robot_config(config) if config else None)
        for kind, msgtype, topic, qos in (('verdicts', VerdictArray, 'verdicts', RELIABLE),
                                          ('violations', ViolationEvent, 'violations', EVENTS),
                                          ('supervisor_actions', SupervisorAction, 'supervisor_actions', EVENTS),
                                          ('gate', GateDecision, 'gate/decisions', latched(256)),
                                          ('diagnostics', DiagnosticArray, '/diagnostics', RELIABLE)):
            self.create_subscription(msgtype, topic, functools.partial(self._on_message, kind), qos, raw=True)
        # TF arrives far faster than a 3D view needs it: kept serialized, sent as each link's newest pose.
        self.create_subscription(TFMessage, '/tf', self.view.tf.add, RELIABLE, raw=True)
        self.create_subscription(TFMessage, '/tf_static', lambda raw: self.view.tf.add(raw, static=True), STATIC_TF,
                                 raw=True)
        self._tf_ticks = 0
        self.create_timer(TF_EVERY_NS * 1e-9, self._send_tf)
        self._pub_diag = self.create_publisher(DiagnosticArray, '/diagnostics', RELIABLE)
        self.create_timer(RESEND_EVERY_NS * 1e-9, self._every_second)
        self.get_logger().info(f'Foxglove: {self.server.address} ('
                               f'{"read-only" if self.access.read_only else "operator actions after login"})')

    # ------------------------------------------------------------ inputs
    def _offer(self, producer: Callable[[], Iterable[Message]]) -> None:
        if not self.server.offer(producer):
            self.get_logger().warning('Foxglove: its queue is full; messages dropped (counted in /diagnostics)',
                                      throttle_duration_sec=10.0)

    def _on_message(self, kind: str, raw: bytes) -> None:
        self._offer(lambda: self.view.take(kind, raw))

    def _send_tf(self) -> None:
        """Each link's newest pose since the last send, the static tree every RESEND_EVERY_NS."""
        self._tf_ticks += 1
        with_static = self._tf_ticks % (RESEND_EVERY_NS // TF_EVERY_NS) == 0
        now_ns = self.get_clock().now().nanoseconds
        self._offer(lambda: self.view.transforms(now_ns, with_static))

    def _every_second(self) -> None:
        """The markers again (a client that connects late sees what is open) and the server's health."""
        now_ns = self.get_clock().now().nanoseconds
        server = self.server
        self._offer(lambda: [*self.view.markers(now_ns),
                             ('/safemanip/server', {'timestamp': time_json(now_ns), 'queued': server.queued,
                                                    'dropped': server.dropped, 'sent': server.sent,
                                                    'errors': server.errors}, now_ns)])
        level = DiagnosticStatus.WARN if server.dropped or server.errors else DiagnosticStatus.OK
        arr = DiagnosticArray()
        arr.header.stamp = self.get_clock().now().to_msg()
        arr.status.append(DiagnosticStatus(
            level=level, name='safemanip/foxglove', hardware_id=self.get_name(),
            message=f'{server.address}: {server.sent} sent, {server.dropped} dropped, {server.errors} errors',
            values=[KeyValue(key='dropped', value=str(server.dropped)), KeyValue(key='sent', value=str(server.sent)),
                    KeyValue(key='errors', value=str(server.errors)),
                    KeyValue(key='tf_dropped', value=str(self.view.tf.dropped)),
                    KeyValue(key='last_error', value=server.last_error)]))
        self._pub_diag.publish(arr)

    # ------------------------------------------------------ operator actions
    def _operator_services(self) -> list[ServiceSpec]:
        return [
            ServiceSpec('/safemanip/login', 'present the operator credential: this connection may act from now on',
                        self._login),
            ServiceSpec('/safemanip/acknowledge', 'acknowledge a hold ({"release_stop": true} to release a stop)',
                        self._allowed(self._acknowledge)),
            ServiceSpec('/safemanip/resume', 'acknowledge, retrying until the supervisor resumes '
                                             '({"wait_s": 30})', self._allowed(self._resume)),
            ServiceSpec('/safemanip/start_episode', 'start a monitoring episode',
                        self._allowed(lambda rq: self._trigger(f'{self._monitor}/start_episode'))),
            ServiceSpec('/safemanip/end_episode', 'end the monitoring episode',
                        self._allowed(lambda rq: self._trigger(f'{self._monitor}/end_episode'))),
        ]

    def _login(self, client_id: int, request: dict[str, Any]) -> dict[str, Any]:
        presented = request.get('credential')
        if not isinstance(presented, str) or not self.access.login(client_id, presented):
            self.get_logger().warning(f'Foxglove: client {client_id} presented a wrong operator credential')
            raise PermissionError('refused: not the operator credential')
        self.get_logger().info(f'Foxglove: client {client_id} logged in as the operator')
        return {'success': True, 'message': 'logged in: this connection may act'}

    def _allowed(self, action: Callable[[dict[str, Any]], dict[str, Any]]
                 ) -> Callable[[int, dict[str, Any]], dict[str, Any]]:
        def guarded(client_id: int, request: dict[str, Any]) -> dict[str, Any]:
            if not self.access.allows(client_id):
                raise PermissionError('refused: log in first (service /safemanip/login with the operator '
                                      'credential)')
            return action(request)
        return guarded

    def _acknowledge(self, request: dict[str, Any]) -> dict[str, Any]:
        name = 'acknowledge_stop' if request.get('release_stop') is True else 'acknowledge'
        return self._trigger(f'{self._supervisor}/{name}')

    def _resume(self, request: dict[str, Any]) -> dict[str, Any]:
        wait_s = request.get('wait_s', 30.0)
        if not isinstance(wait_s, (int, float)) or not 0 <= wait_s <= MAX_RESUME_WAIT_S:
            raise ValueError(f'wait_s: a number of seconds in [0, {MAX_RESUME_WAIT_S:g}]')
        deadline = time.monotonic() + float(wait_s)
        while True:
            answer = self._acknowledge(request)
            if answer['success'] or time.monotonic() >= deadline:
                return answer
            time.sleep(0.5)

    def _trigger(self, service: str) -> dict[str, Any]:
        """Call a std_srvs/Trigger service of the stack from the server's
        thread (the node's executor answers it): its success and message."""
        with self._client_lock:
            client = self._triggers.get(service)
            if client is None:
                client = self._triggers[service] = self.create_client(Trigger, service)
        if not client.wait_for_service(timeout_sec=CALL_TIMEOUT_S):
            raise TimeoutError(f'{self.resolve_service_name(service)}: no such service answers')
        done = threading.Event()
        future = client.call_async(Trigger.Request())
        future.add_done_callback(lambda _: done.set())
        if not done.wait(CALL_TIMEOUT_S):
            raise TimeoutError(f'{self.resolve_service_name(service)}: no answer within {CALL_TIMEOUT_S:g} s')
        result = future.result()
        if result is None:
            raise RuntimeError(f'{self.resolve_service_name(service)}: the call failed ({future.exception()})')
        return {'success': bool(result.success), 'message': str(result.message),
                'service': self.resolve_service_name(service)}

    def destroy_node(self) -> None:
        self.server.stop()
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """``ros2 run safemanip_ros foxglove --ros-args -p address:=8765`` (or the
    launch file's ``foxglove:=8765``): the server beside a stack launched
    node by node."""
    return run_node(FoxgloveNode, 'foxglove', args)
