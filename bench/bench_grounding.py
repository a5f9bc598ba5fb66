"""Grounding cost per message (update + evaluate), pure functions without
ROS: a 9-joint JointState, a 50-pair contact array, a 30-frame TF tree and a
640x480 image with 4 markers; and the share of one core they need together
at 20 Hz (camera at 10 Hz).  Target: under 20 %.  Then one tracked cube,
picked and carried, under simulator truth and realistic detections.

    python bench/bench_grounding.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from safemanip_ros.grounding import (  # noqa: E402
    ContactConfig,
    ContactGrounding,
    ContactSample,
    JointConfig,
    JointStateGrounding,
    SupportSurface,
    TfConfig,
    TfGrounding,
)
from safemanip_ros.grounding.camera import CameraConfig, CameraGrounding, ColourRegion, MarkerDetector, image_to_array  # noqa: E402


def per_call_us(fn, n: int) -> float:
    times = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def tracked_cube_us(level: str, repeats: int) -> float:
    """Live TF grounding of one tracked cube (the object tracker, support,
    slip and the preconditions), a frame at a time as the live node runs it,
    at a perception level (safemanip_ros/sim/perception.py): a cube resting
    2 s, grasped, lifted and carried 1 s, set down and released; per frame
    the hand's pose, the detections published by then, one evaluation.  The
    best of ``repeats`` runs, microseconds per frame."""
    from safemanip_ros.grounding.geometry import Shape
    from safemanip_ros.sim.perception import LEVELS, PoseDetector
    up = (0.0, 0.0, 0.0, 1.0)
    cfg = TfConfig('world', 'hand', objects={'cube': 'cube'}, supports={'table': SupportSurface('table', 5.0, 5.0)},
                   shapes={'cube': Shape('box', (0.02, 0.02, 0.02))}, support_gap_m=0.01)
    best = float('inf')
    for rep in range(repeats):
        g = TfGrounding(cfg)
        g.update(0.0, [('world', 'table', (0.0, 0.0, 0.8), up)], static=True)
        det = PoseDetector(LEVELS[level], ['cube'], rep)
        inputs = []
        for k in range(160):
            t = k / 20.0
            lift = 0.1 * min(max(t - 2.5, 0.0), 0.5) / 0.5 * (1.0 - min(max(t - 4.5, 0.0), 0.5) / 0.5)
            cube = (0.3 * min(max(t - 3.2, 0.0), 1.0), 0.0, 0.82 + lift)
            grasped = 2.0 <= t < 5.5
            hand = cube if grasped else (cube[0], 0.0, 0.9 + 0.1 * max(t - 5.5, 0.0))
            det.observe(t, {'cube': (cube, up), 'gripper0_right_eef': (hand, up)})
            inputs.append((t, hand, [(d.stamp_s, d.poses['cube']) for d in det.published(t)], grasped))
        start = time.perf_counter()
        for t, hand, dets, grasped in inputs:
            g.update(t, [('world', 'hand', hand, up)])
            for stamp, pose in dets:
                g.update(stamp, [('world', 'cube', *pose)])
            g.evaluate(t, {'cube': grasped})
        best = min(best, (time.perf_counter() - start) / len(inputs))
    return best * 1e6


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument('--quick', action='store_true')
    args = ap.parse_args()
    n = 50 if args.quick else 1000
    rng = np.random.default_rng(0)

    arm = [f'j{i}' for i in range(7)]
    joints = JointStateGrounding(JointConfig(arm, ['f1', 'f2'], {j: (-3.0, 3.0) for j in arm}, {j: 2.0 for j in arm}))
    names = arm + ['f1', 'f2']

    def joint_step(i):
        joints.update(i * 0.05, names, rng.normal(0, 0.5, 9).tolist(), rng.normal(0, 0.1, 9).tolist())
        joints.evaluate(i * 0.05)
    us_joint = per_call_us(joint_step, n)

    ents = [f'obj{i}' for i in range(20)]
    contacts = ContactGrounding(ContactConfig(
        {f'link{i}' for i in range(8)}, {'lf', 'rf'}, {f'{e}_g': e for e in ents}, movable=set(ents[:10]),
        graspable=set(ents[:10]), entity_hazards={e: {'contamination'} if i < 2 else set() for i, e in enumerate(ents)}))
    bodies = [f'link{i}' for i in range(8)] + ['lf', 'rf'] + [f'{e}_g' for e in ents]
    pairs = [ContactSample(bodies[a], bodies[b], 1.0) for a, b in rng.integers(0, len(bodies), (50, 2))]

    def contact_step(i):
        contacts.update(i * 0.05, pairs)
        contacts.evaluate(i * 0.05)
    us_contact = per_call_us(contact_step, n)

    frames = [f'f{i}' for i in range(30)]
    objects = {f'o{i}': frames[20 + i] for i in range(5)}
    tf = TfGrounding(TfConfig('world', frames[7], objects, {'table': SupportSurface(frames[29], 0.5, 0.5)},
                              {'near': (frames[7], frames[20], 0.05)}, {}))
    parents = ['world'] + frames[:-1]

    def tf_step(i):
        stamp = i * 0.05
        tf.update(stamp, [(parents[k] if k < 8 else 'world', frames[k], (0.1 * k, 0.0, 0.01 * i), (0, 0, 0, 1))
                          for k in range(30)])
        tf.evaluate(stamp, {o: (i // 20) % 2 == 0 for o in objects})
    us_tf = per_call_us(tf_step, n)

    us_tracked = {level: tracked_cube_us(level, max(3, n // 100)) for level in ('truth', 'realistic')}

    import cv2
    canvas = np.full((480, 640, 3), 255, np.uint8)
    d = cv2.aruco.getPredefinedDictionary(cv2.aruco.DICT_4X4_50)
    for k, (x, y) in enumerate([(100, 100), (400, 100), (100, 300), (400, 300)]):
        canvas[y:y + 60, x:x + 60] = cv2.cvtColor(cv2.aruco.generateImageMarker(d, k, 60), cv2.COLOR_GRAY2RGB)
    data = canvas.tobytes()
    K = np.array([[600.0, 0, 320], [0, 600.0, 240], [0, 0, 1]])
    detector = MarkerDetector('DICT_4X4_50', 0.05)
    cam = CameraGrounding(CameraConfig({'bin': ColourRegion(0, 0, 200, 200, (0, 120, 70), (10, 255, 255))}))
    found = []

    def camera_step(i):
        img = image_to_array('rgb8', 480, 640, 640 * 3, data)
        cam.update(i * 0.1, img)
        cam.evaluate(i * 0.1)
        found.append(len(detector.detect(img, K, [0] * 5)))
    us_cam = per_call_us(camera_step, max(10, n // 10))
    assert found[-1] == 4, found[-1]

    share = (us_joint + us_contact + us_tf) * 20 / 1e6 + us_cam * 10 / 1e6
    print('\n## Grounding cost per message (median, update + evaluate)')
    print(f'JointState, 9 joints:          {us_joint:9.1f} us')
    print(f'contact array, 50 pairs:       {us_contact:9.1f} us')
    print(f'TF tree, 30 frames, 5 objects: {us_tf:9.1f} us')
    print(f'image 640x480, 4 markers:      {us_cam:9.1f} us (conversion, colour region, detection + pose)')
    for level, us in us_tracked.items():
        print(f'tracked cube, {level + " detections:":<17}{us:9.1f} us per frame (picked and carried; '
              f'{us * 20 / 1e4:.1f} % of a core at 20 Hz)')
    print(f'one core at 20 Hz (camera 10 Hz): {share * 100:.1f} % (target < 20 %)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
