"""The robot-side interfaces a supervisor hold goes through besides its
trajectory topic and ``std_srvs/Trigger`` services.

* :class:`TrajectoryGoalCanceller` cancels every goal of a trajectory action
  server — ros2_control's ``joint_trajectory_controller``
  (``<controller>/follow_joint_trajectory``, ``control_msgs/action/
  FollowJointTrajectory``) or any other action that moves the arm — so a hold
  does not race the goal that is moving the arm.  It speaks the action
  protocol's own cancel service (``<action>/_action/cancel_goal``,
  ``action_msgs/srv/CancelGoal``: a zero goal id and stamp cancel every goal)
  and reads the goals' states from ``<action>/_action/status``
  (``action_msgs/msg/GoalStatusArray``).  Both are the same for every action
  type and every ROS 2 distro, so no ``control_msgs`` is needed to cancel.
* :class:`ControllerSwitch` switches ros2_control's controller manager
  (``controller_manager_msgs/srv/SwitchController`` at
  ``/controller_manager/switch_controller``) from the controllers that move
  the arm to a configured safe one on a hold (STRICT: all or nothing), and
  back on resume.  Only the fields every distro's definition shares are set
  (``activate_controllers``, ``deactivate_controllers``, ``strictness``,
  ``activate_asap``, ``timeout``), so the distro's own interface works.
* :class:`ServoPause` pauses and unpauses MoveIt Servo through its
  ``std_srvs/srv/SetBool`` pause service (``servo_node/pause_servo``, MoveIt 2
  Jazzy and later; Humble's Trigger pair is the supervisor's
  ``pause_service``/``resume_service``).

Each request is asynchronous (the supervisor never blocks on a robot
service); :meth:`poll` is called by the supervisor's watchdog and returns a
failure text once a request was refused or not answered within
``timeout_s``, which the supervisor treats as a hold not delivered.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from action_msgs.msg import GoalStatus, GoalStatusArray
from action_msgs.srv import CancelGoal
from builtin_interfaces.msg import Duration
from rclpy.client import Client
from rclpy.node import Node
from std_srvs.srv import SetBool

from .qos import ACTION_STATUS

MOVING = (GoalStatus.STATUS_ACCEPTED, GoalStatus.STATUS_EXECUTING)
CANCEL_ERRORS = {CancelGoal.Response.ERROR_REJECTED: 'rejected',
                 CancelGoal.Response.ERROR_UNKNOWN_GOAL_ID: 'unknown goal id',
                 CancelGoal.Response.ERROR_GOAL_TERMINATED: 'goal already terminated'}


@dataclass
class _Pending:
    what: str
    future: Any
    deadline: float          # time.monotonic() by which the answer must be in


class _Requests:
    """One asynchronous request at a time to a robot service, judged when
    its answer arrives (:meth:`_judge`) or its time is up."""

    def __init__(self, node: Node, srv_type: Any, name: str, timeout_s: float) -> None:
        self.node, self.timeout_s = node, timeout_s
        self._client: Client[Any, Any] = node.create_client(srv_type, name)
        self._pending: _Pending | None = None

    @property
    def pending(self) -> bool:
        """A request is out, not yet answered."""
        return self._pending is not None

    def _send(self, what: str, request: Any, unavailable: str) -> bool:
        if not self._client.service_is_ready():
            self.node.get_logger().error(unavailable)
            return False
        self._pending = _Pending(what, self._client.call_async(request), time.monotonic() + self.timeout_s)
        return True

    def poll(self, now: float) -> str | None:
        """A failure text once the request was refused or not answered in
        time; None otherwise (also while waiting)."""
        p = self._pending
        if p is None:
            return None
        if p.future.done():
            self._pending = None
            response = p.future.result()
            return f'{p.what}: no response' if response is None else self._judge(p.what, response)
        if now > p.deadline:
            self._pending = None
            return f'{p.what}: no answer within {self.timeout_s:g} s'
        return None

    def _judge(self, what: str, response: Any) -> str | None:
        raise NotImplementedError


class TrajectoryGoalCanceller(_Requests):
    """Cancels every active goal of the action server ``action`` (e.g.
    ``/joint_trajectory_controller/follow_joint_trajectory``)."""

    def __init__(self, node: Node, action: str, timeout_s: float) -> None:
        self.action = action.rstrip('/')
        super().__init__(node, CancelGoal, f'{self.action}/_action/cancel_goal', timeout_s)
        self._moving: list[bytes] = []          # ids of goals accepted or executing, from the status topic
        node.create_subscription(GoalStatusArray, f'{self.action}/_action/status', self._on_status, ACTION_STATUS)

    def _on_status(self, msg: GoalStatusArray) -> None:
        self._moving = [bytes(s.goal_info.goal_id.uuid) for s in msg.status_list if s.status in MOVING]

    @property
    def moving_goals(self) -> int:
        """Goals the server reports accepted or executing (its last status)."""
        return len(self._moving)

    def hold(self) -> bool:
        """Ask the server to cancel every goal (a zero goal id and stamp:
        action_msgs/srv/CancelGoal).  False (not delivered): the server is
        not there.  The answer is judged by :meth:`poll`."""
        return self._send(f'cancel of {self.action}', CancelGoal.Request(),
                          f'trajectory_action {self.action}: its cancel service is not available')

    def resume(self) -> bool:
        """Nothing to undo: whoever sent the goal sends the next one."""
        return True

    def _judge(self, what: str, response: Any) -> str | None:
        """Refused while goals were moving is a failure; with nothing moving
        there was nothing to cancel (rcl_action then answers "rejected")."""
        code, canceling = int(response.return_code), len(response.goals_canceling)
        if code == CancelGoal.Response.ERROR_NONE and (canceling or not self._moving):
            self.node.get_logger().info(f'{what}: {canceling} goal(s) canceling')
            return None
        if not self._moving:
            return None
        # rclpy answers "no error" with the goals its cancel callback refused left out of the list.
        why = 'refused' if code == CancelGoal.Response.ERROR_NONE else CANCEL_ERRORS.get(code, f'error {code}')
        return f'{what}: {why} while {len(self._moving)} goal(s) move'


class _OnOff(_Requests):
    """An interface a hold turns on and resume turns off (a pause, a
    controller switch): one request each, refused when the answer's
    ``ok_field`` is false (its ``message``, where the type has one, says why)."""

    ok_field = 'success'

    def _request(self, on: bool) -> tuple[str, Any, str]:
        """(what it does, the request, the error when the service is not there)."""
        raise NotImplementedError

    def hold(self) -> bool:
        return self._send(*self._request(True))

    def resume(self) -> bool:
        return self._send(*self._request(False))

    def _judge(self, what: str, response: Any) -> str | None:
        if getattr(response, self.ok_field):
            return None
        message = getattr(response, 'message', '')       # Humble's SwitchController answers ok only
        return f'{what}: refused{f" ({message})" if message else ""}'


class ControllerSwitch(_OnOff):
    """A hold deactivates ``motion_controllers`` and activates
    ``hold_controller`` through the controller manager's ``service``
    (e.g. ``/controller_manager/switch_controller``); resume switches back."""

    ok_field = 'ok'

    def __init__(self, node: Node, service: str, hold_controller: str, motion_controllers: list[str],
                 timeout_s: float) -> None:
        from controller_manager_msgs.srv import SwitchController
        self.service, self.hold_controller, self.motion_controllers = service, hold_controller, list(motion_controllers)
        self._type = SwitchController
        super().__init__(node, SwitchController, service, timeout_s)

    def _request(self, on: bool) -> tuple[str, Any, str]:
        active, inactive = ([self.hold_controller], self.motion_controllers) if on else \
            (self.motion_controllers, [self.hold_controller])
        seconds = int(self.timeout_s)
        request = self._type.Request(activate_controllers=active, deactivate_controllers=inactive,
                                     strictness=self._type.Request.STRICT, activate_asap=True,
                                     timeout=Duration(sec=seconds, nanosec=int((self.timeout_s - seconds) * 1e9)))
        return (f'switch to {", ".join(active)} via {self.service}', request,
                f'switch_controller_service {self.service} is not available')


class ServoPause(_OnOff):
    """MoveIt Servo's ``std_srvs/srv/SetBool`` pause service (``data`` true:
    pause): paused by a hold, unpaused on resume."""

    def __init__(self, node: Node, service: str, timeout_s: float) -> None:
        self.service = service
        super().__init__(node, SetBool, service, timeout_s)

    def _request(self, on: bool) -> tuple[str, Any, str]:
        return (f'{"pause" if on else "unpause"} via {self.service}', SetBool.Request(data=on),
                f'servo_pause_service {self.service} is not available')


__all__ = ['ControllerSwitch', 'ServoPause', 'TrajectoryGoalCanceller']
