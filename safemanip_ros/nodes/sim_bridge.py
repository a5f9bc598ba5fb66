"""``sim_bridge``: a robosuite task as a robot stack on DDS.

Steps a :class:`~safemanip_ros.sim.world.SimWorld` headless on the CPU, one
control step per period of ``1/20 s × real_time_factor`` wall time, driven
by a scripted policy with an injected fault, and publishes exactly what a
real stack does: ``/clock`` (sim time; run the monitoring stack with
``use_sim_time``), ``joint_states``, ``/tf`` (``world → body`` for every
moving body), ``/tf_static`` (fixed bodies, transient local) and
``contacts`` (safemanip_ros/ContactArray, MuJoCo body pairs with their
normal force) and ``skill_events`` (safemanip_ros/SkillEvent: each phase of
the scripted policy as a skill START and END, as a behaviour tree announces
its skills).

It obeys the supervisor like a ``joint_trajectory_controller``: a
``trajectory_msgs/JointTrajectory`` on ``controller_topic``, or a goal of
its ``control_msgs/action/FollowJointTrajectory`` action
(``trajectory_action``), suspends the policy and the arm tracks the
trajectory: each point's joint positions are turned into an end-effector
target by forward kinematics, which the operational-space controller
follows; a one-point trajectory at the current positions holds the arm.  A
goal succeeds once its last point's time has passed; a canceled goal holds
the arm where it is measured, as the real controller does; ``~/resume`` (std_srvs/Trigger) hands the arm back
to the policy, ``~/pause`` holds it.  An empty trajectory cancels tracking.

Parameters: ``task`` (Lift), ``fault`` (none, midair_drop, ...), ``seed``,
``real_time_factor`` (1.0), ``max_held_s`` (end the rollout this long after
a hold; 2.0), ``truth_file`` (write the rollout's ground truth and the
holds received here), ``controller_topic``
(joint_trajectory_controller/joint_trajectory), ``wait_for_subscribers``
(1: start once this many nodes subscribe to joint_states), ``camera`` (a
robosuite camera, e.g. ``agentview``: ``image`` (rgb8), ``depth`` (32FC1,
metres), ``camera_info`` and its optical frame on ``/tf`` every
``camera_every_frames`` steps, rendered on
the CPU with ``MUJOCO_GL=egl`` or ``osmesa``; empty: none), ``perception``
(``truth``: every body's pose exact on ``/tf``; ``realistic`` or ``double``:
the objects' poses as a camera tracker publishes them instead —
:mod:`safemanip_ros.sim.perception` — noisy, at 10 Hz, stamped at capture
and published late, some missed), ``trajectory_action``
(joint_trajectory_controller/follow_joint_trajectory), ``end_episode_service`` (e.g.
``/monitor/end_episode``: called when the rollout is over, so the monitor
publishes its final metrics; empty: none).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

import numpy as np
from control_msgs.action import FollowJointTrajectory
from geometry_msgs.msg import Point, Quaternion, Transform, TransformStamped, Vector3
from rclpy.action.server import ActionServer, CancelResponse, GoalResponse
from rclpy.node import Node
from rclpy.task import Future
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState, RegionOfInterest
from std_msgs.msg import Header
from std_srvs.srv import Trigger
from tf2_msgs.msg import TFMessage
from trajectory_msgs.msg import JointTrajectory

from safemanip_ros.msg import Contact, ContactArray, SkillEvent

from ..errors import ParameterError
from ..settings import SIM_BRIDGE
from ..sim import ros_messages
from ..sim.perception import LEVELS, PoseDetector, tracked_bodies
from ..sim.policies import EEF_BODY, Truth
from ..sim.recording import TASK_TARGET, RolloutSpec, camera_detector, task_script
from ..sim.world import CONTROL_RATE_HZ, SimSample, SimWorld
from ..stamps import stamp_s
from .guard import CallbackGuard
from .params import RosParameters, check_setting, declare_settings
from .qos import RELIABLE, SENSORS, SKILL_EVENTS, STATIC_TF
from .runner import run_node


class _RclpyTime:
    """``builtin_interfaces/Time`` built by keyword, like rosbags' class."""

    def __new__(cls, sec: int, nanosec: int) -> Any:     # builds another class
        from builtin_interfaces.msg import Time
        return Time(sec=sec, nanosec=nanosec)


RCLPY_TYPES = ros_messages.MessageTypes(
    Time=_RclpyTime, Header=Header, JointState=JointState, TFMessage=TFMessage, TransformStamped=TransformStamped,
    Transform=Transform, Vector3=Vector3, Quaternion=Quaternion, Contact=Contact, ContactArray=ContactArray,
    Point=Point, Clock=Clock, SkillEvent=SkillEvent, Image=Image, CameraInfo=CameraInfo,
    RegionOfInterest=RegionOfInterest, byte_array=bytes)
OSC_POSITION_M = 0.05      # robosuite OSC_POSE: an action of 1 moves the target 5 cm ...
OSC_ROTATION_RAD = 0.5     # ... or turns it 0.5 rad


class SimBridgeNode(RosParameters, CallbackGuard, Node):
    def __init__(self) -> None:
        super().__init__('sim_bridge')
        declare_settings(self, SIM_BRIDGE)
        for setting in SIM_BRIDGE:
            check_setting(self, setting)
        def p(name: str) -> Any:
            return self.get_parameter(name).value
        self.types = RCLPY_TYPES
        level = str(p('perception'))
        if level not in LEVELS:
            raise ParameterError(f'perception: unknown level {level!r}; known: {", ".join(LEVELS)}')
        self.camera = str(p('camera')) or LEVELS[level].camera    # the camera level sees through its camera
        if LEVELS[level].camera and self.camera != LEVELS[level].camera:
            raise ParameterError(f'perception: level {level} finds objects in camera {LEVELS[level].camera!r}, '
                                 f'not camera {self.camera!r}: leave camera unset or name that one')
        self.world = SimWorld(str(p('task')), int(p('seed')), camera=self.camera)
        self.sample = self.world.reset()
        spec = RolloutSpec(str(p('task')), str(p('fault')), int(p('seed')))
        self.truth = Truth(spec.task, spec.fault, spec.seed)
        self.policy, self.labeller = task_script(self.world, spec, self.truth)
        self.holds: list[dict[str, Any]] = []
        self._tracking: list[tuple[float, np.ndarray]] | None = None    # (sim time, arm joint positions)
        self._held_since_s: float | None = None
        self.finished = False
        # A rollout harness tells the monitor that the rollout ended (its final metrics are what a
        # deployment gate counts): the monitor's ~/end_episode, called once the rollout is over.
        service = str(p('end_episode_service'))
        self._end_client: Any = self.create_client(Trigger, service) if service else None
        self._ending: tuple[float, object | None] | None = None     # (wall deadline, the call's future)
        self._arm = [j for j in self.sample.joint_names if j.startswith('robot0_joint')]
        static = self.world.static_bodies()
        self._dynamic = [b for b in self.sample.poses if b not in set(static)]
        self._detector: PoseDetector | None = None
        if not LEVELS[level].exact:
            tracked = tracked_bodies(self._dynamic)
            self._dynamic = [b for b in self._dynamic if b not in set(tracked)]
            self._detector = camera_detector(self.world, LEVELS[level], tracked) if LEVELS[level].camera else \
                PoseDetector(LEVELS[level], tracked, seed=spec.seed + 7919)
        self._pub_clock = self.create_publisher(Clock, '/clock', 10)
        # Reliable, as ros2_control's joint_state_broadcaster and simulators publish: a best-effort
        # subscriber still matches, a reliable one loses nothing on a busy machine.
        self._pub_js = self.create_publisher(JointState, 'joint_states', RELIABLE)
        self._pub_tf = self.create_publisher(TFMessage, '/tf', 100)
        self._pub_contacts = self.create_publisher(ContactArray, 'contacts', RELIABLE)
        self._pub_static = self.create_publisher(TFMessage, '/tf_static', STATIC_TF)
        # The policy's phases, as a behaviour tree would announce its skills.
        self._pub_skills = self.create_publisher(SkillEvent, 'skill_events', SKILL_EVENTS)
        self._phases = ros_messages.PhaseEvents(TASK_TARGET.get(spec.task, ''))
        self._pub_static.publish(ros_messages.transforms(self.types, self.sample, static))
        if self.camera:
            # A rendered frame costs ~0.1 s on the CPU: one every camera_every_frames steps.
            self._pub_image = self.create_publisher(Image, 'image', SENSORS)
            self._pub_depth = self.create_publisher(Image, 'depth', SENSORS)
            self._pub_info = self.create_publisher(CameraInfo, 'camera_info', SENSORS)
        self.create_subscription(JointTrajectory, str(p('controller_topic')), self._on_trajectory,
                                 RELIABLE)
        # The trajectory controller's action: one goal at a time, a new one preempts (aborts) the old.
        self._goal: tuple[Any, Future[str], float] | None = None     # (goal handle, outcome, end time in sim s)
        self._action = ActionServer(self, FollowJointTrajectory, str(p('trajectory_action')), self._execute,
                                    goal_callback=self._on_goal, cancel_callback=lambda h: CancelResponse.ACCEPT)
        self.create_service(Trigger, '~/pause', self._srv_pause)
        self.create_service(Trigger, '~/resume', self._srv_resume)
        self._started = False
        self._publish()
        period = 1.0 / CONTROL_RATE_HZ * float(p('real_time_factor'))
        self.create_timer(period, self._tick)

    # ------------------------------------------------------------- control
    def _on_trajectory(self, msg: JointTrajectory) -> None:
        if not msg.points:
            self._tracking = None            # ROS convention: an empty trajectory cancels
            return
        missing = [j for j in self._arm if j not in msg.joint_names]
        if missing:
            self.get_logger().error(f'trajectory without arm joints {missing}: ignored')
            return
        self._track(msg)

    def _on_goal(self, goal: Any) -> GoalResponse:
        trajectory = goal.trajectory
        if not trajectory.points or any(j not in trajectory.joint_names for j in self._arm):
            self.get_logger().error('FollowJointTrajectory goal without points or arm joints: rejected')
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    async def _execute(self, handle: Any) -> Any:
        """Track the goal's trajectory until its last point's time (succeeded),
        a cancel (held where measured, canceled) or a newer goal (aborted)."""
        if self._goal is not None:
            self._goal[1].set_result('aborted')
        outcome: Future[str] = Future()
        tracking = self._track(handle.request.trajectory)
        self._goal = (handle, outcome, tracking[-1][0])
        result = await outcome
        Result = FollowJointTrajectory.Result
        if result == 'canceled':
            handle.canceled()
            return Result(error_code=Result.SUCCESSFUL, error_string='canceled: holding the measured position')
        if result == 'aborted':
            handle.abort()
            return Result(error_code=Result.INVALID_GOAL, error_string='preempted by a newer goal')
        handle.succeed()
        return Result(error_code=Result.SUCCESSFUL)

    def _poll_goal(self) -> None:
        if self._goal is None:
            return
        handle, outcome, end_s = self._goal
        if handle.is_cancel_requested:
            self._hold_here()
            outcome.set_result('canceled')
        elif self.sample.stamp_s >= end_s:
            outcome.set_result('succeeded')
        else:
            return
        self._goal = None

    def _track(self, msg: Any) -> list[tuple[float, np.ndarray]]:
        """Suspend the policy; the arm follows ``msg`` (a JointTrajectory) from
        now, along the (sim time, arm joint positions) returned."""
        index = {n: i for i, n in enumerate(msg.joint_names)}
        now = self.sample.stamp_s
        tracking = [(now + stamp_s(pt.time_from_start), np.array([pt.positions[index[j]] for j in self._arm]))
                    for pt in msg.points]
        self._tracking = tracking
        if self._held_since_s is None:
            self._held_since_s = now
        self.holds.append({'frame': self.sample.step, 'sim_time_s': now, 'points': len(msg.points)})
        self.get_logger().info(f'trajectory of {len(msg.points)} point(s) received at frame {self.sample.step}: '
                               f'policy suspended, arm follows the controller command')
        return tracking

    def _hold_here(self) -> None:
        q = np.array([self.sample.joint_positions[self.sample.joint_names.index(j)] for j in self._arm])
        self._tracking = [(self.sample.stamp_s, q)]
        self._held_since_s = self._held_since_s or self.sample.stamp_s

    def _srv_pause(self, request: Any, response: Any) -> Any:
        self._hold_here()
        response.success, response.message = True, f'held at frame {self.sample.step}'
        return response

    def _srv_resume(self, request: Any, response: Any) -> Any:
        self._tracking, self._held_since_s = None, None
        response.success, response.message = True, f'policy resumed at frame {self.sample.step}'
        return response

    def _tracking_action(self, tracking: list[tuple[float, np.ndarray]]) -> np.ndarray:
        """OSC action towards the end-effector pose of the trajectory's
        joint positions at the current sim time (forward kinematics)."""
        import mujoco
        now = self.sample.stamp_s
        times = [t for t, _ in tracking]
        i = int(np.searchsorted(times, now))
        if i == 0:
            q = tracking[0][1]
        elif i >= len(times):
            q = tracking[-1][1]
        else:
            (t0, q0), (t1, q1) = tracking[i - 1], tracking[i]
            q = q0 + (q1 - q0) * (now - t0) / max(t1 - t0, 1e-9)
        m, d = self.world.model, self.world.data
        scratch = mujoco.MjData(m)
        scratch.qpos[:] = d.qpos
        for name, value in zip(self._arm, q):
            scratch.qpos[m.jnt_qposadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, name)]] = value
        mujoco.mj_kinematics(m, scratch)
        b = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, EEF_BODY)
        a = np.zeros(self.world.action_dim)
        a[:3] = np.clip((scratch.xpos[b] - d.xpos[b]) / OSC_POSITION_M, -1, 1)
        R = scratch.xmat[b].reshape(3, 3) @ d.xmat[b].reshape(3, 3).T     # rotation still to go
        angle = math.acos(max(-1.0, min(1.0, (np.trace(R) - 1) / 2)))
        if angle > 1e-6:
            axis = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]]) / (2 * math.sin(angle))
            a[3:6] = np.clip(axis * angle / OSC_ROTATION_RAD, -1, 1)
        a[-1] = 0.0      # the gripper keeps its closure
        return a

    def _tick(self) -> None:
        if self._ending is not None:
            self._end_episode_call()
            return
        if self.finished:
            return
        if not self._started:
            if self.count_subscribers('joint_states') < int(self.get_parameter('wait_for_subscribers').value):
                self._publish()          # keep /clock and the state flowing while the stack comes up
                return
            self._started = True
            self.get_logger().info(f'rollout {self.truth.task}/{self.truth.fault}/seed {self.truth.seed} starts')
        self._poll_goal()
        if self.labeller is not None:
            self.labeller.update(self.sample)
        self.truth.frames = self.sample.step + 1
        held_too_long = (self._held_since_s is not None and
                         self.sample.stamp_s - self._held_since_s >= float(self.get_parameter('max_held_s').value))
        if self.policy.done or held_too_long or self.sample.step >= 600:
            self._finish()
            return
        if self._tracking is not None:
            action = self._tracking_action(self._tracking)
        else:
            action = self.policy.act(self.sample)
            self._publish_skills(self._phases.changes(self.policy.phase))
        self.sample = self.world.step(action)
        self._publish()

    def _publish_skills(self, events: list[tuple[str, str, int]]) -> None:
        for skill, target, phase in events:
            self._pub_skills.publish(ros_messages.skill_event(self.types, self.sample.stamp_s, skill, target, phase))

    def _publish(self) -> None:
        s, t = self.sample, self.types
        self._pub_js.publish(ros_messages.joint_state(t, s))
        self._pub_tf.publish(ros_messages.transforms(t, s, self._dynamic))
        if self._detector is not None:
            self._detector.observe(s.stamp_s, s.poses)
            for d in self._detector.published(s.stamp_s):
                self._pub_tf.publish(ros_messages.detection(t, d.stamp_s, d.poses))
        self._pub_contacts.publish(ros_messages.contacts(t, s))
        if self.camera and s.step % int(self.get_parameter('camera_every_frames').value) == 0:
            self._publish_camera(s)
        # The clock last: when a node's time reaches t, the state at t is already on its way.
        self._pub_clock.publish(ros_messages.clock(t, s))

    def _publish_camera(self, s: SimSample) -> None:
        size = int(self.get_parameter('camera_size_px').value)
        img, depth_m = self.world.render_rgbd(size, size)
        frame = f'{self.camera}_optical'
        # As an RGB-D driver publishes them (and a camera-level recording keeps them): ros_messages.rgbd.
        image, depth, info = ros_messages.rgbd(self.types, s.stamp_s, frame, img, depth_m,
                                               self.world.camera_intrinsics(size, size))
        self._pub_image.publish(image)
        self._pub_depth.publish(depth)
        self._pub_info.publish(info)
        self._pub_tf.publish(ros_messages.detection(self.types, s.stamp_s, {frame: self.world.camera_optical_pose()}))

    def _end_episode_call(self) -> None:
        """Call ``end_episode_service`` (once it is there) and finish when it
        answers; give up with an error after 10 s."""
        assert self._ending is not None and self._end_client is not None
        deadline_s, future = self._ending
        if future is None and self._end_client.service_is_ready():
            self._ending = (deadline_s, self._end_client.call_async(Trigger.Request()))
        elif future is not None and future.done():          # type: ignore[attr-defined]
            reply = future.result()                         # type: ignore[attr-defined]
            self.get_logger().info(f'{self._end_client.srv_name}: {reply.message}')
            self._ending, self.finished = None, True
            return
        if time.monotonic() > deadline_s:
            self.get_logger().error(f'{self._end_client.srv_name} did not answer in 10 s: the monitor did not '
                                    f'close the rollout')
            self._ending, self.finished = None, True

    def _finish(self) -> None:
        self._publish_skills(self._phases.close())
        if self.labeller is not None:
            self.labeller.close(self.sample.step)
        if self._end_client is not None:
            self._ending = (time.monotonic() + 10.0, None)
        else:
            self.finished = True
        out = dict(self.truth.to_dict(), supervisor_holds=self.holds)
        path = self.get_parameter('truth_file').value
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(json.dumps(out, indent=1))
        self.get_logger().info(f'rollout finished after {self.truth.frames} frames; events '
                               f'{[e.event for e in self.truth.events] or "none"}; {len(self.holds)} hold(s)')


def main(args: list[str] | None = None) -> int:
    """Run one rollout and exit when it has finished; ``sim_bridge --serve``:
    one rollout per request, for as long as requests come (:func:`serve`)."""
    argv = sys.argv if args is None else args
    own = argv[1:argv.index('--ros-args')] if '--ros-args' in argv else argv[1:]
    if own == ['--serve']:
        return serve(sys.stdin, argv[argv.index('--ros-args') + 1:] if '--ros-args' in argv else [])
    if own:
        print(f'sim_bridge: error: unknown arguments {own}; usage: sim_bridge [--serve] [--ros-args ...]',
              file=sys.stderr)
        return 2
    return run_node(SimBridgeNode, 'sim_bridge', args, until=lambda n: n.finished)


def serve(requests: TextIO, ros_args: list[str] | None = None) -> int:
    """``sim_bridge --serve``: the simulator stays up between rollouts, for a
    harness that runs many of them one after another (``safemanip demo``).

    Each line of ``requests`` is one rollout, a JSON object:
    ``{"ros_args": [...], "log": PATH}`` — the ROS arguments ``sim_bridge``
    would be started with for it (``-p task:=Lift -p seed:=3 ...``, without
    ``--ros-args``; after the server's own ``ros_args``, so they win) and the
    file its output goes to.  The rollout runs as ``sim_bridge`` alone runs
    it: a new world, in a ROS context of its own (a new DDS participant, as
    a new process would be), ended when the rollout is over.  When it has
    ended, one JSON line answers on standard output: ``{"exit_code": N}`` (N
    as ``sim_bridge`` would exit).  What the rollouts share is the process:
    robosuite imported and its kernels compiled once, and MuJoCo's compiled
    meshes (what that saves: ``bench/bench_sim_server.py``).  The end of
    ``requests`` (or SIGINT while idle) ends the server, exit 0; a bug in
    a rollout is answered with exit code 70 and ends it."""
    replies = os.fdopen(os.dup(sys.stdout.fileno()), 'w', buffering=1)
    try:
        for line in requests:
            if not line.strip():
                continue
            try:
                request = json.loads(line)
                if not isinstance(request['ros_args'], list):
                    raise TypeError('ros_args is not a list')
                rollout_args = [*(ros_args or []), *(str(a) for a in request['ros_args'])]
                log = Path(request['log'])
            except (ValueError, KeyError, TypeError) as exc:
                print(f'sim_bridge --serve: error: a request is {{"ros_args": [...], "log": PATH}}, got '
                      f'{line.strip()[:200]!r} ({exc})', file=sys.stderr)
                return 2
            with _output_to(log):
                try:
                    code = run_node(SimBridgeNode, 'sim_bridge', ['sim_bridge', '--ros-args', *rollout_args],
                                    until=lambda n: n.finished, on_exit=lambda n: n.world.close())
                except Exception:        # a bug: reported in the rollout's log, and it ends the server
                    traceback.print_exc()
                    code = 70
            replies.write(json.dumps({'exit_code': code}) + '\n')
            if code == 70:
                return 70
    except KeyboardInterrupt:
        pass
    return 0


@contextmanager
def _output_to(log: Path) -> Iterator[None]:
    """Standard output and error (the ROS log's console output among them) to
    ``log`` while inside, at the file-descriptor level."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, 'w') as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, old in zip((1, 2), saved):
                os.dup2(old, fd)
                os.close(old)


__all__ = ['SimBridgeNode']
