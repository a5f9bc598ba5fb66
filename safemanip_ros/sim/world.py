"""A robosuite task stepped headless on the CPU, read out the way a real
robot stack publishes itself (no ROS here: plain values).

:class:`SimWorld` wraps one robosuite environment (Panda, 20 Hz control,
operational-space controller) and, after each control step, gives a
:class:`SimSample`: the sim time, every joint's position and velocity
(``sensor_msgs/JointState``'s content), the pose of every named body in the
world (``/tf``: one ``world → body`` transform each; fixed bodies as
``/tf_static``) and the active MuJoCo contacts as body pairs with their
normal force (our ``ContactArray``; a contact's geoms are mapped to their
bodies with ``model.geom_bodyid``).

robosuite and MuJoCo are imported on first use: installing them is optional
(``requirements/sim.txt``).
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import SafemanipError

CONTROL_RATE_HZ = 20.0
TASKS = ('Lift', 'PickPlaceBread', 'Door')


class SimError(SafemanipError):
    """The simulator is missing or refused a request."""


@dataclass
class SimSample:
    """The state after one control step.  Lengths in metres, angles in
    radians, quaternions (x, y, z, w), forces in newtons, times in seconds."""

    stamp_s: float
    step: int
    joint_names: list[str]
    joint_positions: list[float]
    joint_velocities: list[float]
    poses: dict[str, tuple[tuple[float, float, float], tuple[float, float, float, float]]]
    contacts: list[tuple[str, str, float]]
    observations: dict[str, np.ndarray] = field(default_factory=dict, repr=False)


def _quiet_robosuite() -> None:
    """robosuite logs a page of warnings at import (private macros, optional
    robots, mink); they are not ours to act on."""
    os.environ.setdefault('MUJOCO_GL', 'disable')
    for name in ('robosuite', 'robosuite_logs'):
        logging.getLogger(name).setLevel(logging.ERROR)


def import_robosuite() -> Any:
    _quiet_robosuite()
    import contextlib
    import io
    try:
        # robosuite's log handler binds sys.stderr when it is imported: bind it to a sink.
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            import robosuite
    except ImportError as exc:
        raise SimError(f'robosuite is not installed ({exc}); install requirements/sim.txt and '
                       f'requirements/sim-nodeps.txt (make setup does)') from None
    from robosuite.utils.log_utils import ROBOSUITE_DEFAULT_LOGGER
    ROBOSUITE_DEFAULT_LOGGER.setLevel(logging.ERROR)
    for h in ROBOSUITE_DEFAULT_LOGGER.handlers:
        h.setLevel(logging.ERROR)
    return robosuite


class SimWorld:
    """One robosuite environment.  ``task``: a robosuite environment name
    (``Lift``, ``PickPlaceBread``, ``Door``, ...); ``seed`` fixes the
    model's randomised sizes (drawn once, when the model is built) and the
    placements (drawn again at every :meth:`reset`, from ``seed`` as it is
    then): a new world and a scripted policy give the same rollout for the
    same seed in any process."""

    def __init__(self, task: str = 'Lift', seed: int = 0, horizon_frames: int = 2000, camera: str = '') -> None:
        """``camera``: a robosuite camera to render on request (:meth:`render_rgbd`);
        needs a GL back-end (``MUJOCO_GL=egl`` with Mesa, or ``osmesa``)."""
        if camera:
            os.environ.setdefault('MUJOCO_GL', 'egl')
        suite = import_robosuite()
        self.camera = camera
        import mujoco
        self._mujoco = mujoco
        self.task = task
        self.seed = seed
        np.random.seed(seed)   # robosuite's placement samplers draw from numpy's global generator
        try:
            # robosuite's own generator (``seed``) also draws the model's randomised sizes (the Lift cube):
            # unseeded, the same seed gave another cube, and another rollout, in every process.
            self.env = suite.make(task, robots='Panda', has_renderer=False, has_offscreen_renderer=bool(camera),
                                  use_camera_obs=False, control_freq=int(CONTROL_RATE_HZ), horizon=horizon_frames,
                                  hard_reset=False, ignore_done=True, reward_shaping=False, seed=seed)
        except Exception as exc:     # robosuite raises bare Exceptions for unknown tasks and robots
            raise SimError(f'robosuite could not make task {task!r}: {exc}') from None
        self.model = self.env.sim.model._model
        self.data = self.env.sim.data._data
        self.obs: dict[str, np.ndarray] = {}
        self.step_count = 0
        self.body_names = [mujoco.mj_id2name(self.model, mujoco.mjtObj.mjOBJ_BODY, b) or f'body{b}'
                           for b in range(self.model.nbody)]
        self.joint_names = [mujoco.mj_id2name(self.model, mujoco.mjtObj.mjOBJ_JOINT, j) or f'joint{j}'
                            for j in range(self.model.njnt)]
        # Only hinge and slide joints are JointState joints (free joints are object poses, on /tf).
        hinge_slide = (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE)
        self._joints = [j for j in range(self.model.njnt) if self.model.jnt_type[j] in hinge_slide]
        self._fixed_bodies = {b for b in range(1, self.model.nbody) if self._is_static(b)}
        self.reset()

    def _is_static(self, body: int) -> bool:
        """A body welded to the world (no joint between it and the root)."""
        m = self.model
        while body != 0:
            if m.body_jntnum[body] > 0:
                return False
            body = int(m.body_parentid[body])
        return True

    def _reseed(self) -> None:
        """Put every random generator robosuite draws placements from into
        the state ``seed`` gives (in place: the placement samplers share them)."""
        np.random.seed(self.seed)
        state = np.random.default_rng(self.seed).bit_generator.state
        sampler = getattr(self.env, 'placement_initializer', None)
        gens = [getattr(self.env, 'rng', None), getattr(sampler, 'rng', None)]
        gens += [getattr(s, 'rng', None) for s in (getattr(sampler, 'samplers', None) or {}).values()]
        for gen in {id(g): g for g in gens if isinstance(g, np.random.Generator)}.values():
            gen.bit_generator.state = state

    def reset(self) -> SimSample:
        self._reseed()
        self.obs = self.env.reset()
        self.step_count = 0
        return self.sample()

    @property
    def action_dim(self) -> int:
        return int(self.env.action_dim)

    @property
    def time_s(self) -> float:
        return self.step_count / CONTROL_RATE_HZ

    def step(self, action: np.ndarray) -> SimSample:
        """One control step (1/20 s): ``action`` is robosuite's OSC_POSE
        action (Δposition ×0.05 m, Δorientation, gripper −1 open … +1 close)."""
        a = np.clip(np.asarray(action, dtype=float), -1.0, 1.0)
        self.obs, *_ = self.env.step(a)
        self.step_count += 1
        return self.sample()

    def body_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(position, quaternion x y z w) of a body in the world."""
        b = self.body_names.index(name)
        w, x, y, z = self.data.xquat[b]
        return self.data.xpos[b].copy(), np.array([x, y, z, w])

    def static_bodies(self) -> list[str]:
        return [self.body_names[b] for b in sorted(self._fixed_bodies)]

    def sample(self) -> SimSample:
        m, d, mj = self.model, self.data, self._mujoco
        poses = {}
        for b in range(1, m.nbody):
            w, x, y, z = (float(v) for v in d.xquat[b])
            px, py, pz = (float(v) for v in d.xpos[b])
            poses[self.body_names[b]] = ((px, py, pz), (x, y, z, w))
        contacts = []
        force = np.zeros(6)
        for i in range(d.ncon):
            c = d.contact[i]
            b1, b2 = int(m.geom_bodyid[c.geom1]), int(m.geom_bodyid[c.geom2])
            mj.mj_contactForce(m, d, i, force)
            contacts.append((self.body_names[b1], self.body_names[b2], float(abs(force[0]))))
        names = [self.joint_names[j] for j in self._joints]
        pos = [float(d.qpos[m.jnt_qposadr[j]]) for j in self._joints]
        vel = [float(d.qvel[m.jnt_dofadr[j]]) for j in self._joints]
        return SimSample(self.time_s, self.step_count, names, pos, vel, poses, contacts, dict(self.obs))

    def render_rgbd(self, width_px: int = 128, height_px: int = 128) -> tuple[np.ndarray, np.ndarray]:
        """The configured camera's RGB image (uint8[h, w, 3]) and depth along
        its optical axis in metres (float32[h, w], a ``32FC1`` image as an RGB-D
        driver publishes it), top row first, from one render."""
        if not self.camera:
            raise SimError('no camera configured (SimWorld(camera=NAME))')
        rgb, buffer = self.env.sim.render(camera_name=self.camera, width=width_px, height=height_px, depth=True)
        # OpenGL's depth buffer, non-linear in [0, 1], to metres (MuJoCo's clip planes scale with the model).
        extent = float(self.model.stat.extent)
        near, far = float(self.model.vis.map.znear) * extent, float(self.model.vis.map.zfar) * extent
        depth_m = near / (1.0 - buffer.astype(np.float64) * (1.0 - near / far))
        return np.ascontiguousarray(rgb[::-1]), np.ascontiguousarray(depth_m[::-1], dtype=np.float32)

    def camera_intrinsics(self, width_px: int = 128, height_px: int = 128) -> np.ndarray:
        """The pinhole matrix K of the configured camera (square pixels, vertical field of view)."""
        mj = self._mujoco
        cam = mj.mj_name2id(self.model, mj.mjtObj.mjOBJ_CAMERA, self.camera)
        if cam < 0:
            raise SimError(f'no camera {self.camera!r} in task {self.task}')
        f = 0.5 * height_px / math.tan(math.radians(float(self.model.cam_fovy[cam])) / 2)
        return np.array([[f, 0, width_px / 2], [0, f, height_px / 2], [0, 0, 1.0]])

    def camera_optical_pose(self) -> tuple[tuple[float, float, float], tuple[float, float, float, float]]:
        """The camera's optical frame in the world (x right, y down, z forward; MuJoCo's
        camera looks along its -z with y up: a half turn about x)."""
        mj = self._mujoco
        cam = mj.mj_name2id(self.model, mj.mjtObj.mjOBJ_CAMERA, self.camera)
        R = self.data.cam_xmat[cam].reshape(3, 3) @ np.diag([1.0, -1.0, -1.0])
        q = np.zeros(4)
        mj.mju_mat2Quat(q, R.reshape(-1))
        w, x, y, z = (float(v) for v in q)
        px, py, pz = (float(v) for v in self.data.cam_xpos[cam])
        return (px, py, pz), (x, y, z, w)

    def close(self) -> None:
        self.env.close()


def quaternion_angle(q1: np.ndarray, q2: np.ndarray) -> float:
    """Angle (rad) between two orientations (x, y, z, w)."""
    dot = abs(float(np.dot(q1 / np.linalg.norm(q1), q2 / np.linalg.norm(q2))))
    return 2.0 * math.acos(min(1.0, dot))
