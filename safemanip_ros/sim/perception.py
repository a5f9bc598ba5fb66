"""A simulated object-pose detector: what a camera-based tracker publishes
in place of the simulator's ground truth.

A real cell has no simulator truth for its objects: their poses come from a
detector or marker tracker, which is noisy, runs slower than the control
loop, misses detections (more often while the fingers hide the object) and
publishes each pose some time after the image it was computed from.
:class:`PoseDetector` turns the simulator's true poses into such a stream.

Published convention (what the grounding expects from a real stack too):
every detection cycle that sees at least one object is **one
``tf2_msgs/TFMessage`` on ``/tf``** with one ``world → object`` transform per
object seen, every transform's ``header.stamp`` the **capture time** of the
image (not the publication time); it is published ``latency_s`` after that
stamp.  Objects not seen in a cycle are simply absent from it.  The robot's
own links keep coming, exact and on time, in their own ``/tf`` messages.

Lengths in metres, angles in radians, rates in hertz, times in seconds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..grounding.colour_depth import ObjectLook, locate
from .policies import EEF_BODY, ROBOT_PREFIXES

Pose = tuple[tuple[float, float, float], tuple[float, float, float, float]]


@dataclass(frozen=True)
class PerceptionLevel:
    """How far the detector is from the truth.

    ``position_noise_m`` and ``orientation_noise_rad``: standard deviation
    of the Gaussian error per axis (a rotation vector's components for the
    orientation); ``rate_hz``: detection cycles per second (0: every
    control step); ``dropout``: probability a detection is missed;
    ``latency_s``: from capture (the stamp) to publication;
    ``occlusion``: probability a detection is missed while the object's
    origin is within ``occlusion_radius_m`` of the gripper (between or near
    the fingers), on top of ``dropout``; ``outliers``: probability a
    detection is grossly wrong (a mis-association, a depth hole), its
    position ``outlier_m`` away in a random direction (drawn from a stream
    of its own, so the other errors are the level's without outliers);
    ``flips``: probability a detection's orientation is the object's turned
    half a turn about one of its own axes (drawn from a stream of its own):
    a box or cylinder looks the same so turned, so a detector that fits a
    model to its pixels reports either (a symmetric object's pose flip);
    ``correlation_s``: the position error's correlation time (0: each
    detection's error independent; else first-order, each the last one's
    times ``exp(-dt / correlation_s)`` plus fresh noise, the same spread: a
    tracker's error that drifts, as real ones do);
    ``camera``: a camera of the task rendered RGB-D at ``camera_size_px``
    square, the objects found in its pixels (:class:`CameraDetector`), so the
    errors are the camera's (occlusion by the arm, depth at edges, colour
    bleeding), not a noise model's."""

    name: str
    position_noise_m: float = 0.0
    orientation_noise_rad: float = 0.0
    rate_hz: float = 0.0
    dropout: float = 0.0
    latency_s: float = 0.0
    occlusion: float = 0.0
    occlusion_radius_m: float = 0.06
    outliers: float = 0.0
    outlier_m: float = 0.05
    flips: float = 0.0
    correlation_s: float = 0.0
    camera: str = ''
    camera_size_px: int = 128

    @property
    def exact(self) -> bool:
        """Ground truth: every pose, on time, without error."""
        return self == PerceptionLevel(self.name)

    def scaled(self, name: str, noise: float, dropout: float) -> 'PerceptionLevel':
        """This level with its noise and dropout multiplied."""
        return replace(self, name=name, position_noise_m=self.position_noise_m * noise,
                       orientation_noise_rad=self.orientation_noise_rad * noise,
                       dropout=min(1.0, self.dropout * dropout))


REALISTIC = PerceptionLevel('realistic', position_noise_m=0.005, orientation_noise_rad=math.radians(2.0),
                            rate_hz=10.0, dropout=0.10, latency_s=0.10, occlusion=0.5)
LEVELS = {
    'truth': PerceptionLevel('truth'),
    'realistic': REALISTIC,
    'double': REALISTIC.scaled('double', noise=2.0, dropout=2.0),
    'outliers': replace(REALISTIC, name='outliers', outliers=0.03),
    'flips': replace(REALISTIC, name='flips', flips=0.2),
    'drift': replace(REALISTIC, name='drift', correlation_s=1.0),
    'fingers': replace(REALISTIC, name='fingers', occlusion=1.0),
    'bias': replace(REALISTIC, name='bias', position_noise_m=0.008, correlation_s=60.0),
    'camera': PerceptionLevel('camera', rate_hz=10.0, latency_s=0.10, camera='agentview', camera_size_px=128),
}
"""The named levels ``--perception`` takes: simulator truth, what a good
camera tracker on a cell gives (5 mm and 2° noise, 10 Hz, 10 % missed,
100 ms late, half the detections lost between the fingers), twice its
noise and dropout, it with 3 % of its detections 5 cm off, with a fifth
of them half turned about an own axis (a symmetric object's pose flip),
with its error drifting (correlated over 1 s), with every detection lost
while the object is within 6 cm of the gripper (the hand hides it from the
last centimetres of the approach until after the release), with an 8 mm
error per axis that stays all rollout long (correlated over 60 s: a
calibration bias, different per object), and the task's
``agentview`` camera at 128×128 pixels, 10 Hz, 100 ms late, its objects
found by colour and depth (:mod:`safemanip_ros.grounding.colour_depth`).

The camera level's objects and their colours are the task's robot
configuration's ``camera.objects`` (``config/robots/robosuite_*.yaml``), as
a cell's perception node reads them."""

def tracked_bodies(bodies: list[str]) -> list[str]:
    """The bodies a detector reports: every moving body that is not the robot's."""
    return [b for b in bodies if not b.startswith(ROBOT_PREFIXES)]


@dataclass
class Detection:
    """One detection cycle: captured at ``stamp_s``, published at ``publish_s``."""

    stamp_s: float
    publish_s: float
    poses: dict[str, Pose]


class PoseDetector:
    """Detections of ``bodies`` from true poses, seeded (``seed``)."""

    def __init__(self, level: PerceptionLevel, bodies: list[str], seed: int) -> None:
        self.level = level
        self.bodies = list(bodies)
        self.rng = np.random.default_rng(seed)
        self._outlier_rng = np.random.default_rng([seed, 7])
        self._flip_rng = np.random.default_rng([seed, 11])
        self.flips_injected = 0             # detections reported half a turn about an own axis (``flips``)
        self._correlated: dict[str, tuple[float, np.ndarray]] = {}     # body → (time, last unit error)
        self._next_capture_s: float | None = None
        self._pending: list[Detection] = []
        self.outliers_injected = 0          # detections made grossly wrong (``outliers``), so far

    def observe(self, time_s: float, poses: dict[str, Pose]) -> None:
        """The true poses at ``time_s``; captures a detection when one is due."""
        lv = self.level
        if not self._due(time_s):
            return
        eef = np.array(poses[EEF_BODY][0]) if EEF_BODY in poses else None
        seen: dict[str, Pose] = {}
        for body in self.bodies:
            # Draw every number whatever happens, so one level's detections line up with another's.
            u_drop, u_occl = self.rng.random(2)
            n = self.rng.normal(0.0, 1.0, 3)
            if lv.correlation_s > 0:
                # First-order (AR(1)) position error: correlated over ``correlation_s``, its spread the level's.
                last_s, last = self._correlated.get(body, (time_s, None))
                rho = math.exp(-(time_s - last_s) / lv.correlation_s) if last is not None else 0.0
                n = rho * (last if last is not None else 0.0) + math.sqrt(1.0 - rho * rho) * n
                self._correlated[body] = (time_s, n)
            dp = n * lv.position_noise_m
            dr = self.rng.normal(0.0, 1.0, 3) * lv.orientation_noise_rad
            if body not in poses or u_drop < lv.dropout:
                continue
            (x, y, z), q = poses[body]
            if eef is not None and u_occl < lv.occlusion and \
                    float(np.linalg.norm(np.array([x, y, z]) - eef)) < lv.occlusion_radius_m:
                continue
            u_out, away = self._outlier_rng.random(), self._outlier_rng.normal(0.0, 1.0, 3)
            if u_out < lv.outliers:
                dp = dp + away / float(np.linalg.norm(away)) * lv.outlier_m
                self.outliers_injected += 1
            u_flip, axis = self._flip_rng.random(), int(self._flip_rng.integers(3))
            if u_flip < lv.flips:
                q = _half_turn(q, axis)
                self.flips_injected += 1
            seen[body] = ((x + dp[0], y + dp[1], z + dp[2]), _rotate(q, dr))
        if seen:
            self._pending.append(Detection(time_s, time_s + lv.latency_s, seen))

    def _due(self, time_s: float) -> bool:
        """Whether a capture is due at ``time_s`` (then the next one is scheduled)."""
        if self._next_capture_s is not None and time_s + 1e-9 < self._next_capture_s:
            return False
        period = 1.0 / self.level.rate_hz if self.level.rate_hz > 0 else 0.0
        self._next_capture_s = time_s + period if self._next_capture_s is None else \
            max(self._next_capture_s + period, time_s)
        return True

    def published(self, up_to_s: float) -> list[Detection]:
        """The detections published at or before ``up_to_s`` not yet returned, oldest first."""
        out = [d for d in self._pending if d.publish_s <= up_to_s + 1e-9]
        self._pending = [d for d in self._pending if d.publish_s > up_to_s + 1e-9]
        return out


def _rotate(q: tuple[float, float, float, float], rotvec: np.ndarray) -> tuple[float, float, float, float]:
    """``q`` (x, y, z, w) turned by the small rotation ``rotvec`` (rad), applied in the world."""
    angle = float(np.linalg.norm(rotvec))
    if angle == 0.0:
        return q
    ax = rotvec / angle
    s = math.sin(angle / 2)
    dx, dy, dz, dw = ax[0] * s, ax[1] * s, ax[2] * s, math.cos(angle / 2)
    x, y, z, w = q
    # (dw, d) ⊗ (w, q): the error rotation applied after the true one.
    return (dw * x + dx * w + dy * z - dz * y, dw * y - dx * z + dy * w + dz * x,
            dw * z + dx * y - dy * x + dz * w, dw * w - dx * x - dy * y - dz * z)


def _half_turn(q: tuple[float, float, float, float], axis: int) -> tuple[float, float, float, float]:
    """``q`` (x, y, z, w) turned half a turn about its own ``axis`` (0: x, 1: y, 2: z): ``q ⊗ e_axis``."""
    x, y, z, w = q
    # q ⊗ (e, 0) for the unit vector e: the body-frame turn applied before the pose.
    return ((w, z, -y, -x), (-z, w, x, -y), (y, -x, w, -z))[axis]


Frame = tuple[np.ndarray, np.ndarray, np.ndarray, Pose]
"""One RGB-D capture: rgb uint8[h, w, 3], depth float32[h, w] (m), the pinhole K, the optical frame in the world."""


class CameraDetector(PoseDetector):
    """Detections found in rendered pixels: at each capture ``capture()``
    gives an RGB-D frame and :func:`~safemanip_ros.grounding.colour_depth.locate`
    finds the objects of ``looks`` in it (identity orientation: it estimates
    none); published ``latency_s`` after the capture, as :class:`PoseDetector`'s.
    ``seconds`` and ``errors_m`` keep each capture's cost and each detection's
    position error against the truth, for the bench."""

    def __init__(self, level: PerceptionLevel, looks: list[ObjectLook], capture: Callable[[], Frame],
                 keep_frames: bool = False) -> None:
        """``keep_frames``: keep each captured frame until :meth:`take_frames`
        (a recording writes them; the live bridge publishes its own and
        keeps none, so nothing grows while it runs)."""
        super().__init__(level, [look.name for look in looks], seed=0)
        self.keep_frames = keep_frames
        self.looks = looks
        self.capture = capture
        self.seconds: list[float] = []
        self.errors_m: list[float] = []
        self.missed = 0
        self.captured: list[tuple[float, Frame]] = []      # (capture time, frame) not yet taken (:meth:`take_frames`)

    def observe(self, time_s: float, poses: dict[str, Pose]) -> None:
        lv = self.level
        if not self._due(time_s):
            return
        t0 = time.perf_counter()
        rgb, depth, K, camera_pose = self.capture()
        if self.keep_frames:
            self.captured.append((time_s, (rgb, depth, K, camera_pose)))
        found = locate(rgb, depth, K, camera_pose, self.looks)
        self.seconds.append(time.perf_counter() - t0)
        seen: dict[str, Pose] = {}
        for look in self.looks:
            f = found.get(look.name)
            if f is None:
                self.missed += 1
                continue
            seen[look.name] = (f.position_m, (0.0, 0.0, 0.0, 1.0))
            if look.name in poses:
                self.errors_m.append(float(np.linalg.norm(np.subtract(f.position_m, poses[look.name][0]))))
        if seen:
            self._pending.append(Detection(time_s, time_s + lv.latency_s, seen))

    def take_frames(self) -> list[tuple[float, Frame]]:
        """The frames captured since the last call, oldest first (a recording keeps them)."""
        out, self.captured = self.captured, []
        return out

    def figures(self) -> dict[str, Any]:
        """What the camera cost and how far it was off, for the bench: each
        capture's time (render and locate, ms), each detection's position
        error against the truth (mm), and the objects not found."""
        return {'capture_ms': [round(t * 1e3, 2) for t in self.seconds],
                'error_mm': [round(e * 1e3, 2) for e in self.errors_m], 'missed': self.missed}
