"""Physics rollouts written straight to rosbag2 (no DDS): a scripted policy
with an injected fault drives a :class:`~.world.SimWorld`; every control step
is recorded as the raw inputs a real stack publishes, and the fault's
physical ground truth goes to ``truth.json`` inside the bag folder.

The bags are what ``safemanip audit --config config/robots/robosuite_lift.yaml``
and the faithfulness benchmark read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..bag.typestore import typestore
from ..bag.writer import SplitBagWriter
from . import ros_messages
from .perception import LEVELS, CameraDetector, Frame, PerceptionLevel, PoseDetector, tracked_bodies
from .pickplace import PickPlaceLabeller, PickPlacePolicy
from .policies import LiftPolicy, StackPolicy, Truth, TruthLabeller
from .world import SimError, SimWorld

TRUTH_FILE = 'truth.json'
TASK_TARGET = {'Lift': 'cube', 'Stack': 'cube_a', 'PickPlace': 'can'}
"""The entity each task's policy picks and places (config/robots/robosuite_*.yaml)."""
MAX_FRAMES = 400


@dataclass
class RolloutSpec:
    task: str
    fault: str
    seed: int

    @property
    def name(self) -> str:
        return f'{self.task.lower()}_{self.fault}_{self.seed:03d}'


def lift_cube_half_m(world: SimWorld) -> float:
    """The cube's half-height (robosuite randomises it per rollout)."""
    return float(world.env.cube.size[2])


def task_script(world: SimWorld, spec: RolloutSpec, truth: Truth
                ) -> tuple[LiftPolicy | PickPlacePolicy, TruthLabeller | PickPlaceLabeller | None]:
    """The scripted policy with the rollout's fault, and the labeller of its
    physical ground truth, for a world
    just reset."""
    rng = np.random.default_rng(spec.seed)
    if spec.task == 'PickPlace':
        return pickplace_policy(world, spec.fault, rng), PickPlaceLabeller(truth)
    if spec.task == 'Stack':
        # Cube A set down on cube B, with Lift's faults; labelled against cube B's top where it is below.
        half_a, half_b = float(world.env.cubeA.size[2]), float(world.env.cubeB.size[2])
        return (StackPolicy(rng, half_a, half_b, spec.fault),
                TruthLabeller(truth, half_a, body='cubeA_main', support_body='cubeB_main', support_half_m=half_b))
    if spec.task != 'Lift':
        raise ValueError(f'no scripted policy for task {spec.task!r}; known: Lift, PickPlace, Stack')
    half = lift_cube_half_m(world)
    return LiftPolicy(spec.fault, rng, cube_half_m=half), TruthLabeller(truth, half)


def pickplace_policy(world: SimWorld, fault: str, rng: np.random.Generator) -> PickPlacePolicy:
    """The PickPlace policy for this world (the Can's size, the target bin's floor)."""
    k = next(k for k, o in enumerate(world.env.objects) if type(o).__name__ == 'CanObject')
    floor_top = float(world.env.bin1_pos[2]) + 0.02          # both bins' floors: 2 cm thick slabs at z = 0.8
    rest_height = float(world.body_pose('Can_main')[0][2]) - floor_top   # origin above the floor at rest
    # The target bin has four compartments (robosuite's target_bin_placements, one per object).
    return PickPlacePolicy(fault, rng, rest_height, float(world.env.bin2_pos[2]) + 0.02,
                           np.array(world.env.target_bin_placements[k][:2]))


def run_rollout(world: SimWorld, spec: RolloutSpec, out_dir: Path, storage: str = 'mcap',
                perception: PerceptionLevel = LEVELS['truth']) -> Truth:
    """Reset ``world`` with the rollout's seed, run the scripted policy with
    its fault, write ``out_dir/<name>/`` (a bag plus truth.json).  With a
    ``perception`` level other than truth the objects' poses are a
    detector's (:mod:`.perception`, seeded by the rollout's seed), on
    ``/tf`` beside the robot's exact links."""
    world.seed = spec.seed
    sample = world.reset()
    truth = Truth(spec.task, spec.fault, spec.seed)
    policy, labeller = task_script(world, spec, truth)
    ts = typestore()
    types = ros_messages.MessageTypes.from_typestore(ts)
    bag = out_dir / spec.name
    writer = SplitBagWriter(bag, storage, split_s=1e6, custom_data={'truth': TRUTH_FILE})
    try:
        for topic, msgtype in ros_messages.TOPICS.items():
            if topic != '/clock' or types.Clock is not None:
                writer.add_topic(topic, msgtype)
        static = world.static_bodies()
        dynamic = [b for b in sample.poses if b not in set(static)]
        detector = None
        if not perception.exact:
            tracked = tracked_bodies(dynamic)
            dynamic = [b for b in dynamic if b not in set(tracked)]
            detector = PoseDetector(perception, tracked, seed=spec.seed + 7919) if not perception.camera else \
                camera_detector(world, perception, tracked, keep_frames=True)
        if isinstance(detector, CameraDetector):
            # The pixels themselves, as an RGB-D driver publishes them: an audit can find the objects again.
            for topic, msgtype in ros_messages.CAMERA_TOPICS.items():
                writer.add_topic(topic, msgtype)

        def write(topic: str, msg: object, t_ns: int) -> None:
            msgtype = ros_messages.TOPICS.get(topic) or ros_messages.CAMERA_TOPICS[topic]
            writer.write(topic, t_ns, ts.serialize_cdr(msg, msgtype))

        t0_ns = 0
        write('/tf_static', ros_messages.transforms(types, sample, static), t0_ns)
        optical = f'{perception.camera}_optical'
        if isinstance(detector, CameraDetector):      # a fixed camera: its optical frame once, on /tf_static
            write('/tf_static', ros_messages.detection(types, sample.stamp_s, {optical: world.camera_optical_pose()}),
                  t0_ns)

        def write_frames(frames: list[tuple[float, Frame]]) -> None:
            for capture_s, (rgb, depth_m, K, _) in frames:
                capture_ns = int(round(capture_s * 1e9))
                for topic, msg in zip(ros_messages.CAMERA_TOPICS,
                                      ros_messages.rgbd(types, capture_s, optical, rgb, depth_m, K)):
                    write(topic, msg, capture_ns)
        phases = ros_messages.PhaseEvents(TASK_TARGET.get(spec.task, ''))

        def skill_events(events: list[tuple[str, str, int]], stamp_s: float, t_ns: int) -> None:
            for skill, target, phase in events:
                write('/skill_events', ros_messages.skill_event(types, stamp_s, skill, target, phase), t_ns)
        for _ in range(MAX_FRAMES):
            t_ns = int(round(sample.stamp_s * 1e9))
            if types.Clock is not None:
                write('/clock', ros_messages.clock(types, sample), t_ns)
            write('/joint_states', ros_messages.joint_state(types, sample), t_ns)
            write('/tf', ros_messages.transforms(types, sample, dynamic), t_ns)
            write('/contacts', ros_messages.contacts(types, sample), t_ns)
            if detector is not None:
                detector.observe(sample.stamp_s, sample.poses)
                if isinstance(detector, CameraDetector):
                    write_frames(detector.take_frames())
                for d in detector.published(sample.stamp_s):
                    write('/tf', ros_messages.detection(types, d.stamp_s, d.poses),
                          max(t_ns, int(round(d.publish_s * 1e9))))
            if labeller is not None:
                labeller.update(sample)
            truth.frames = sample.step + 1
            if policy.done:
                break
            action = policy.act(sample)
            skill_events(phases.changes(policy.phase), sample.stamp_s, t_ns)
            sample = world.step(action)
        skill_events(phases.close(), sample.stamp_s, int(round(sample.stamp_s * 1e9)))
        if labeller is not None:
            labeller.close(sample.step)
        if isinstance(detector, CameraDetector):
            truth.perception = detector.figures()
    finally:
        writer.close()
    (bag / TRUTH_FILE).write_text(json.dumps(truth.to_dict(), indent=1))
    return truth


def camera_detector(world: SimWorld, level: PerceptionLevel, bodies: list[str],
                    keep_frames: bool = False) -> CameraDetector:
    """The camera level's detector of ``bodies`` in ``world`` (made with
    ``camera=level.camera``): the objects whose colours the task's robot configuration gives
    (``camera.objects``), rendered at the level's size (``keep_frames``: for a recording)."""
    if world.camera != level.camera:
        raise SimError(f'perception level {level.name} renders camera {level.camera!r}: make the world with '
                       f'SimWorld(..., camera={level.camera!r})')
    from ..grounding.config import load_robot_config
    from ..resources import config_path
    from . import ROBOT_CONFIGS
    config = config_path('robots', ROBOT_CONFIGS.get(world.task, 'none'))
    known = load_robot_config(config).camera.objects if config.exists() else []
    looks = [look for look in known if look.name in set(bodies)]
    if not looks:
        raise SimError(f'perception level {level.name}: no colour known for any object of task {world.task} '
                       f'({", ".join(bodies)}): give them in camera.objects of {config.name}')
    n = level.camera_size_px

    def capture() -> Frame:
        rgb, depth = world.render_rgbd(n, n)
        return rgb, depth, world.camera_intrinsics(n, n), world.camera_optical_pose()
    return CameraDetector(level, looks, capture, keep_frames)


def read_truth(bag: Path) -> dict[str, Any] | None:
    path = Path(bag) / TRUTH_FILE
    return json.loads(path.read_text()) if path.exists() else None
