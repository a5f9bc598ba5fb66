"""robosuite Lift as a Gymnasium environment labelled with propositions
(``safemanip/RobosuiteLift-v0``; needs the ``sim`` extra).

The physics is :class:`~safemanip_ros.sim.world.SimWorld` (robosuite 1.5's
Lift, Panda, operational-space control at 20 Hz, headless on the CPU);
actions are its 7-D OSC command (position, rotation, gripper, each in
[-1, 1]).  The observation is the end effector's and the cube's positions
(m, world) and the two finger joint positions.  ``info["propositions"]``
after each step, from contacts and poses:

* ``near`` — the end effector within 5 cm of the cube's centre;
* ``grasped`` — at least two finger bodies touch the cube;
* ``lifted`` — the cube's bottom more than 4 cm above the table top;
* ``on_table`` — the cube's bottom within 5 mm of the table top, not grasped;
* ``dropped`` — not grasped, the cube's bottom more than 2 cm above the
  table and falling faster than 0.2 m/s.

``info["sample"]`` is the simulator sample, so the scripted policies of
:mod:`safemanip_ros.sim.policies` (with their injected faults) can drive
it: :class:`ScriptedLift`.  A natural specification is
``!dropped U (lifted & (!dropped U on_table))``: lift the cube and set it
down, never dropping it on the way.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

from ..sim.policies import EEF_BODY, FINGER_BODIES, TABLE_TOP_Z_M, LiftPolicy
from ..sim.world import SimSample, SimWorld

CUBE = 'cube_main'
NEAR_M, LIFTED_M, ON_TABLE_M, DROP_GAP_M, DROP_SPEED_M_S = 0.05, 0.04, 0.005, 0.02, 0.2


class LiftEnv(gymnasium.Env):
    """robosuite Lift with propositions (module docstring)."""

    metadata = {'render_modes': []}

    def __init__(self, horizon: int = 300) -> None:
        self.horizon = horizon
        self.world: SimWorld | None = None
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (8,), np.float64)
        self.action_space = gymnasium.spaces.Box(-1.0, 1.0, (7,), np.float32)
        self.sample: SimSample | None = None
        self._prev_z: float | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        s = 0 if seed is None else int(seed)
        if self.world is None:
            self.world = SimWorld('Lift', s)
        self.world.seed = s
        self.sample = self.world.reset()
        self._prev_z = None
        return self._obs(), self._info()

    @property
    def cube_half_m(self) -> float:
        assert self.world is not None
        return float(self.world.env.cube.size[2])

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        assert self.world is not None and self.sample is not None, 'reset() first'
        self.sample = self.world.step(np.asarray(action, dtype=np.float64))
        return self._obs(), 0.0, False, self.sample.step >= self.horizon, self._info()

    def _obs(self) -> np.ndarray:
        s = self.sample
        assert s is not None
        fingers = [p for n, p in zip(s.joint_names, s.joint_positions) if 'finger_joint' in n][:2]
        return np.concatenate([s.poses[EEF_BODY][0], s.poses[CUBE][0], fingers + [0.0] * (2 - len(fingers))])

    def propositions(self, s: SimSample) -> set[str]:
        eef, cube = np.array(s.poses[EEF_BODY][0]), np.array(s.poses[CUBE][0])
        gap = float(cube[2]) - self.cube_half_m - TABLE_TOP_Z_M
        fingers = {b for a, c, _ in s.contacts for b in (a, c) if b in FINGER_BODIES and CUBE in (a, c)}
        grasped = len(fingers) >= 2
        falling = self._prev_z is not None and (self._prev_z - float(cube[2])) * 20.0 > DROP_SPEED_M_S
        self._prev_z = float(cube[2])
        out = set()
        if float(np.linalg.norm(eef - cube)) < NEAR_M:
            out.add('near')
        if grasped:
            out.add('grasped')
        if gap > LIFTED_M:
            out.add('lifted')
        if abs(gap) <= ON_TABLE_M and not grasped:
            out.add('on_table')
        if not grasped and gap > DROP_GAP_M and falling:
            out.add('dropped')
        return out

    def _info(self) -> dict[str, Any]:
        assert self.sample is not None
        return {'propositions': self.propositions(self.sample), 'sample': self.sample}

    def close(self) -> None:
        if self.world is not None:
            self.world.close()
            self.world = None


class ScriptedLift:
    """The scripted Lift policy (with an injected ``fault``: midair_drop,
    drag, ...) as a policy of observation and info."""

    def __init__(self, env: LiftEnv, fault: str = 'none', seed: int = 0) -> None:
        self.env, self.fault, self.seed = env, fault, seed
        self.policy: LiftPolicy | None = None

    def reset(self, obs: np.ndarray, info: dict[str, Any]) -> None:
        self.policy = LiftPolicy(self.fault, np.random.default_rng(self.seed), cube_half_m=self.env.cube_half_m)

    def __call__(self, obs: np.ndarray, info: dict[str, Any]) -> np.ndarray:
        assert self.policy is not None
        return self.policy.act(info['sample'])

    @property
    def done(self) -> bool:
        return self.policy is not None and self.policy.done


__all__ = ['LiftEnv', 'ScriptedLift']
