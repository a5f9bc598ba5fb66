"""Object predicates under real perception: detections that are noisy, at
10 Hz, late by 100 ms, missed 10 % of the time and half the time between
the fingers (safemanip_ros/sim/perception.py), against the exact robot
links.  Each robust predicate is driven through the grounding the monitor
uses (TfGrounding), compared with the noise-free result."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from safemanip_ros.grounding.geometry import Shape, SupportSurface
from safemanip_ros.grounding.tf import TfConfig, TfGrounding
from safemanip_ros.grounding.tracking import ObjectTrack, TrackConfig, log_rotation, mean_rotation, slope
from safemanip_ros.sim.perception import LEVELS, PerceptionLevel, PoseDetector

RATE_HZ = 20.0
HALF_M = 0.02
TABLE_Z_M = 0.8
UP = (0.0, 0.0, 0.0, 1.0)


def config(track: TrackConfig = TrackConfig()) -> TfConfig:
    return TfConfig('world', 'hand', objects={'cube': 'cube'},
                    supports={'table': SupportSurface('table', 5.0, 5.0, 0.0)},
                    shapes={'cube': Shape('box', (HALF_M, HALF_M, HALF_M))}, support_gap_m=0.01, track=track)


def run(path, level: PerceptionLevel, seed: int = 0, track: TrackConfig = TrackConfig()) -> list[dict]:
    """Feed the grounding as a live stack would: per 20 Hz tick, the hand
    (exact, on time) and whatever the detector has published by then, then
    evaluate the frame.  ``path(t)`` gives (cube xyz, hand xyz, grasped)."""
    g = TfGrounding(config(track))
    g.update(0.0, [('world', 'table', (0.0, 0.0, TABLE_Z_M), UP)], static=True)
    det = PoseDetector(level, ['cube'], seed)
    out = []
    for k in range(int(path.frames)):
        t = k / RATE_HZ
        cube, hand, grasped = path(t)
        g.update(t, [('world', 'hand', tuple(hand), UP)])
        det.observe(t, {'cube': (tuple(cube), UP), 'gripper0_right_eef': (tuple(hand), UP)})
        for d in det.published(t):
            g.update(d.stamp_s, [('world', 'cube', *d.poses['cube'])])
        out.append(g.evaluate(t, {'cube': grasped}))
    assert g.health.out_of_order == 0 and g.health.clock_jumps == 0, g.health
    return out


class Still:
    """The cube resting on the table, the hand 30 cm away."""

    frames = 400

    def __call__(self, t):
        return np.array([0.1, 0.0, TABLE_Z_M + HALF_M]), np.array([0.1, 0.3, 1.1]), False


class Pick:
    """Rest 2 s; grasp at 2 s; lift 10 cm at 2.5-3 s; carry 0.3 m/s sideways
    for 1 s; set down at 4.5-5 s; release at 5.5 s (or, ``midair``, at 4.2 s
    and the cube falls); the hand leaves."""

    frames = 160

    def __init__(self, midair: bool = False) -> None:
        self.midair = midair

    def __call__(self, t):
        rest = np.array([0.0, 0.0, TABLE_Z_M + HALF_M])
        x = 0.3 * min(max(t - 3.2, 0.0), 1.0)
        lift = 0.1 * (min(max(t - 2.5, 0.0), 0.5) / 0.5) * (1.0 - min(max(t - 4.5, 0.0), 0.5) / 0.5)
        release_s = 4.2 if self.midair else 5.5
        held = rest + [x, 0.0, lift]
        hand = held + [0.0, 0.0, 0.0]
        if t >= release_s:
            at_release = rest + [0.3 * min(max(release_s - 3.2, 0.0), 1.0), 0.0, 0.1 if self.midair else 0.0]
            fall_s = t - release_s
            z = max(at_release[2] - 0.5 * 9.81 * fall_s * fall_s, rest[2])
            cube = np.array([at_release[0], 0.0, z])
            hand = at_release + [0.0, 0.0, 0.1 * min(t - release_s, 1.0)]
            return cube, hand, False
        return held, hand, t >= 2.0


def column(frames: list[dict], name: str) -> list:
    return [f[name] for f in frames]


@pytest.mark.slow
def test_a_still_object_is_stable_and_supported_under_realistic_perception():
    for seed in range(3):
        frames = run(Still(), LEVELS['realistic'], seed)
        warm = frames[20:]            # the first second: the window fills
        assert all(f['object_stable_cube'] is True for f in warm), seed
        assert all(f['object_sliding_cube'] is False for f in warm), seed
        assert all(f['object_supported_cube'] is True for f in warm), seed
        assert all(f['object_settled_cube'] is True for f in warm), seed


def test_noise_free_detections_keep_the_exact_answers():
    """Simulator truth through the same path: stable and supported at rest,
    sliding within 6 frames and not stable within 10 (the window) of a
    0.1 m/s push."""
    class Pushed:
        frames = 120

        def __call__(self, t):
            x = 0.1 * max(t - 3.0, 0.0)
            return np.array([x, 0.0, TABLE_Z_M + HALF_M]), np.array([x - 0.05, 0.0, 0.85]), False
    frames = run(Pushed(), LEVELS['truth'])
    assert frames[50]['object_stable_cube'] and not frames[50]['object_sliding_cube']
    assert all(f['object_sliding_cube'] for f in frames[66:]), column(frames, 'object_sliding_cube')[55:70]
    assert all(f['object_stable_cube'] is False for f in frames[70:]), column(frames, 'object_stable_cube')[55:75]
    assert all(f['object_supported_cube'] for f in frames[2:])


def test_a_pushed_object_slides_within_the_window_under_realistic_perception():
    """0.1 m/s along the table (ten times the sliding threshold, about twice
    the noise floor of a half-second fit to 10 Hz detections): sliding from
    the detections' slope within a second of the push's start, and then
    without a break."""
    class Pushed:
        frames = 120

        def __call__(self, t):
            x = 0.1 * max(t - 3.0, 0.0)
            return np.array([x, 0.0, TABLE_Z_M + HALF_M]), np.array([x - 0.2, 0.0, 1.0]), False
    for seed in range(3):
        frames = run(Pushed(), LEVELS['realistic'], seed)
        sliding = column(frames, 'object_sliding_cube')
        assert not any(sliding[20:60]), seed
        first = next(k for k in range(60, 120) if sliding[k])
        assert first <= 60 + 20, (seed, first)
        assert all(sliding[first + 5:]), seed


def test_a_grasp_keeps_sync_and_support_honest_while_the_object_is_hidden():
    """Carried at 0.3 m/s with detections 100 ms late and half lost between
    the fingers: never 'not synced'; supported on the table before the lift
    and at the release, not while lifted; no unknown while grasped."""
    for seed in range(4):
        frames = run(Pick(), LEVELS['realistic'], seed)
        grasp = range(40, 110)                     # 2.0 s .. 5.5 s
        assert all(frames[k]['object_sync_cube'] is True for k in grasp), seed
        assert all(frames[k]['object_supported_cube'] is False for k in range(62, 88)), seed   # lifted
        assert frames[110]['object_supported_cube'] is True, seed      # the release frame: on the table
        assert all(frames[k]['object_supported_cube'] is not None for k in range(20, 111)), seed


class PressedDown(Pick):
    """:class:`Pick`, but the hand sets the cube down 15 mm lower than the
    table lets it go (the fingers push on, the cube slides up in the grip)."""

    def __call__(self, t):
        cube, hand, grasped = super().__call__(t)
        if grasped and t >= 4.5:
            hand = hand - [0.0, 0.0, 0.015 * min((t - 4.5) / 0.5, 1.0)]
        return cube, hand, grasped


@pytest.mark.parametrize('level', ['truth', 'realistic', 'bias'])
def test_a_cube_pressed_into_the_table_is_placed_where_it_is_supported(level):
    """Carried by the gripper's pose, the pressed cube reads up to 15 mm into
    the table (more than ``support_gap_m``, 10 mm): it still rests on the
    table, and its place preconditions are judged over that support, not
    found false for want of one (one rule for what lies beneath)."""
    for seed in range(3):
        frames = run(PressedDown(), LEVELS[level], seed)
        pressed = range(100, 111)              # 5.0 s .. the release at 5.5 s
        assert all(frames[k]['object_supported_cube'] is True for k in pressed), (level, seed)
        assert all(frames[k]['preconditions_satisfied_place_cube'] is True for k in pressed), (level, seed)


@pytest.mark.parametrize('seed', range(3))
def test_a_detected_support_read_through_gross_outliers_stays_still_beneath_the_cube(seed):
    """A cube resting on a 5 cm block, the cube seen by the realistic
    detector, the block by one a fifth of whose detections are 5 cm off:
    the block's outliers neither move it from under the cube nor make it
    unstable, so the cube stays supported and its place preconditions hold
    throughout (a support, like a tracked object, leaves gross outliers out)."""
    cfg = TfConfig('world', 'hand', objects={'cube': 'cube'},
                   supports={'block': SupportSurface('block', 0.05, 0.05, 0.025)},
                   shapes={'cube': Shape('box', (HALF_M, HALF_M, HALF_M))}, support_gap_m=0.01)
    g = TfGrounding(cfg)
    detectors = [PoseDetector(LEVELS['realistic'], ['cube'], seed),
                 PoseDetector(replace(LEVELS['outliers'], name='outliers20', outliers=0.2), ['block'], seed)]
    block, cube, hand = (0.0, 0.0, TABLE_Z_M + 0.025), (0.0, 0.0, TABLE_Z_M + 0.05 + HALF_M), (0.3, 0.0, 1.1)
    frames = []
    for k in range(200):
        t = k / RATE_HZ
        g.update(t, [('world', 'hand', hand, UP)])
        for det in detectors:
            det.observe(t, {'cube': (cube, UP), 'block': (block, UP), 'gripper0_right_eef': (hand, UP)})
            for d in det.published(t):
                g.update(d.stamp_s, [('world', name, *pose) for name, pose in d.poses.items()])
        frames.append(g.evaluate(t, {'cube': False}))
    assert detectors[1].outliers_injected >= 10, detectors[1].outliers_injected
    # Each one left out is counted in the input health (one 5 cm off may still fall within the gate).
    assert 0 < g.health.gross_outliers <= detectors[1].outliers_injected, g.health
    for name in ('object_supported_cube', 'preconditions_satisfied_place_cube'):
        assert [k for k in range(20, 200) if frames[k][name] is not True] == [], (name, seed)


class Approach(Pick):
    """The hand comes down over the resting cube from 0.3 m above between 0.5
    and 2 s (a camera loses the cube behind it for the last 6 cm), closes at
    2.5 s, then lifts, carries 0.3 m and sets the cube down as :class:`Pick`
    does, half a second later throughout; released at 6 s."""

    frames = 170

    def __call__(self, t):
        if t < 2.5:
            rest = np.array([0.0, 0.0, TABLE_Z_M + HALF_M])
            return rest, rest + [0.0, 0.0, 0.3 * (1.0 - min(max(t - 0.5, 0.0), 1.5) / 1.5)], False
        return super().__call__(t - 0.5)


def test_a_cube_hidden_by_the_hand_from_before_its_grasp_is_carried_where_it_lay():
    """A camera that never sees the cube within 6 cm of the gripper (the hand hides it from the last few
    centimetres of the approach until after the release): while grasped, the cube is where it lay when last
    seen, in the gripper as it closed, so it is known throughout the grasp (3.5 s, longer than any
    detection is kept), unsupported while lifted and supported at the release, never 'not synced'."""
    hidden = replace(LEVELS['realistic'], name='hidden', occlusion=1.0, dropout=0.0)
    for seed in range(3):
        frames = run(Approach(), hidden, seed)
        grasp = range(50, 120)                     # 2.5 s .. 6.0 s
        assert all(frames[k]['object_supported_cube'] is not None for k in grasp), \
            (seed, [k for k in grasp if frames[k]['object_supported_cube'] is None][:5])
        assert all(frames[k]['object_sync_cube'] is True for k in grasp), seed
        assert all(frames[k]['object_supported_cube'] is False for k in range(72, 98)), seed   # lifted
        assert frames[120]['object_supported_cube'] is True, seed      # the release frame: on the table


@pytest.mark.slow
@pytest.mark.parametrize('rate, off_m', [(0.03, 0.05), (0.05, 0.10)])
def test_gross_outliers_read_as_no_slip_while_the_grasp_holds(rate, off_m):
    """A share of the detections grossly wrong (a mis-association, a depth
    hole: ``off_m`` away), on top of the realistic detector, through the
    same carry: the grasp stays synced wherever the noise-free answer is
    synced (the slip test compares medians of several detections, so a
    lone outlier, or two, moves neither), and a real slip is still seen."""
    level = replace(LEVELS['realistic'], name='outliers', outliers=rate, outlier_m=off_m)
    grasp = range(40, 110)
    for seed in range(6):
        frames = run(Pick(), level, seed)
        assert all(frames[k]['object_sync_cube'] is True for k in grasp), (seed, [
            k for k in grasp if frames[k]['object_sync_cube'] is not True])

    class Slipping(Pick):
        """The cube slides 6 cm down in the grip from 3.5 s on (the hand keeps going)."""

        def __call__(self, t):
            cube, hand, grasped = super().__call__(t)
            if grasped and t >= 3.5:
                cube = cube - [0.0, 0.0, 0.06 * min((t - 3.5) / 0.2, 1.0)]
            return cube, hand, grasped
    for seed in range(3):
        frames = run(Slipping(), level, seed)
        slipped = [k for k in range(70, 110) if frames[k]['object_sync_cube'] is False]
        # Seen within 1.5 s of the slip: five detections' median turns after three new ones, and half of
        # them are lost between the fingers (measured: 0.6-1.1 s; with a mean of three, 0.4-0.65 s, and
        # one carry of eight not at all).
        assert slipped and slipped[0] <= 70 + 30, (seed, slipped)


@pytest.mark.slow
def test_gross_outliers_leave_support_and_settling_as_clean_detections_give_them():
    """5 % of the detections 10 cm off (on top of the realistic detector,
    drawn from a stream of their own, so every other error is the same):
    away from a change of the clean answer, *supported* and *settled* are
    what the clean detections give on all but a few frames.  (The still
    pose is the window's mean with gross outliers left out; with the plain
    mean, 49 of 2,761 frames differed in support.)"""
    level = replace(LEVELS['realistic'], name='outliers', outliers=0.05, outlier_m=0.10)

    def steady(col: list, k: int, w: int = 12) -> bool:
        return all(col[j] == col[k] for j in range(max(0, k - w), min(len(col), k + w + 1)))
    # (Settled is also stable: a motion fit a gross outlier still pulls, on a few more frames.)
    for name, share in (('object_supported_cube', 0.004), ('object_settled_cube', 0.01)):
        differ = total = 0
        for path in (Still(), Pick()):
            for seed in range(6):
                clean, wild = run(path, LEVELS['realistic'], seed), run(path, level, seed)
                col = column(clean, name)
                at = [k for k in range(20, len(clean)) if steady(col, k)]
                total += len(at)
                differ += sum(wild[k][name] != clean[k][name] for k in at)
        assert total > 2500 and differ <= share * total, (name, differ, total)


@pytest.mark.slow
def test_pose_flips_of_a_symmetric_object_change_no_predicate():
    """A fifth of the detections report the cube half turned about one of its
    own axes (it looks the same so turned, so a detector that fits a model
    to its pixels may say either; drawn from a stream of their own, so every
    other error is the same): every predicate on every frame equals the one
    without flips, still, carried and dropped; each flip is counted in the
    input health.  (Without the shape's turns, the flips read as spin: the
    still cube was not stable and the carried one slipped.)"""
    level = replace(LEVELS['realistic'], name='flips', flips=0.2)
    for path in (Still(), Pick(), Pick(midair=True)):
        for seed in range(3):
            clean, flipped = run(path, LEVELS['realistic'], seed), run(path, level, seed)
            differ = [(k, name) for k, (a, b) in enumerate(zip(clean, flipped)) for name in a if a[name] != b[name]]
            assert not differ, (type(path).__name__, seed, differ[:10])


def test_a_support_reported_upside_down_still_holds_what_rests_on_it():
    """A support's pose flipped half a turn about its own x (a cube looks the
    same so turned): its top face is the face facing up, so the cube resting
    on it stays supported on every frame; before, the flipped support's
    "top" pointed down and the cube read as floating 5 cm above it."""
    from safemanip_ros.grounding.geometry import Shape, SupportSurface
    block = Shape('box', (0.025, 0.025, 0.025))
    cfg = TfConfig('world', 'hand', objects={'cube': 'cube'},
                   supports={'block': SupportSurface('block', 0.025, 0.025, 0.025)},
                   shapes={'cube': Shape('box', (HALF_M, HALF_M, HALF_M))}, support_shapes={'block': block},
                   support_gap_m=0.01, track=TrackConfig())
    flipped = (1.0, 0.0, 0.0, 0.0)           # half a turn about x
    g = TfGrounding(cfg)
    supported = []
    for k in range(60):
        t = k / RATE_HZ
        g.update(t, [('world', 'hand', (0.3, 0.3, 1.2), UP),
                     ('world', 'block', (0.0, 0.0, TABLE_Z_M + 0.025), flipped if k % 3 == 0 else UP),
                     ('world', 'cube', (0.0, 0.0, TABLE_Z_M + 0.05 + HALF_M), UP)])
        supported.append(g.evaluate(t, {'cube': False})['object_supported_cube'])
    assert all(s is True for s in supported[5:]), supported


@pytest.mark.slow
def test_a_real_turn_in_the_grip_is_still_seen_beside_pose_flips():
    """The cube turns 40 degrees about the vertical in the grip from 3.5 s on
    (beyond ``slip_rad`` 0.3): with a fifth of the detections flipped it is
    seen as a slip, as without flips."""
    level = replace(LEVELS['realistic'], name='flips', flips=0.2)
    angle = lambda t: math.radians(40.0) * min(max(t - 3.5, 0.0) / 0.4, 1.0)     # noqa: E731

    def run_turning(lv, seed):
        g = TfGrounding(config())
        g.update(0.0, [('world', 'table', (0.0, 0.0, TABLE_Z_M), UP)], static=True)
        det = PoseDetector(lv, ['cube'], seed)
        path, out = Pick(), []
        for k in range(int(path.frames)):
            t = k / RATE_HZ
            cube, hand, grasped = path(t)
            a = angle(t) if grasped else angle(5.5)
            q = (0.0, 0.0, math.sin(a / 2), math.cos(a / 2))
            g.update(t, [('world', 'hand', tuple(hand), UP)])
            det.observe(t, {'cube': (tuple(cube), q), 'gripper0_right_eef': (tuple(hand), UP)})
            for d in det.published(t):
                g.update(d.stamp_s, [('world', 'cube', *d.poses['cube'])])
            out.append(g.evaluate(t, {'cube': grasped}))
        return out
    for seed in range(3):
        for lv in (LEVELS['realistic'], level):
            frames = run_turning(lv, seed)
            slipped = [k for k in range(70, 110) if frames[k]['object_sync_cube'] is False]
            assert slipped and slipped[0] <= 70 + 30, (lv.name, seed, slipped)


@pytest.mark.slow
def test_flips_are_counted_in_the_input_health():
    level = replace(LEVELS['realistic'], name='flips', flips=0.2)
    g = TfGrounding(config())
    g.update(0.0, [('world', 'table', (0.0, 0.0, TABLE_Z_M), UP)], static=True)
    det = PoseDetector(level, ['cube'], 1)
    path = Still()
    for k in range(int(path.frames)):
        t = k / RATE_HZ
        cube, hand, _ = path(t)
        g.update(t, [('world', 'hand', tuple(hand), UP)])
        det.observe(t, {'cube': (tuple(cube), UP)})
        for d in det.published(t):
            g.update(d.stamp_s, [('world', 'cube', *d.poses['cube'])])
        g.evaluate(t, {'cube': False})
    # Every flip but one on the first detection (nothing to compare it with) is read as one.
    assert det.flips_injected >= 10 and det.flips_injected - 1 <= g.health.orientation_flips <= det.flips_injected


def test_a_drifting_error_widens_what_an_average_is_trusted_with():
    """A still cube's detections whose error drifts (correlated over 2 s):
    the mean of a window shares its drift, so its standard error is the
    configured noise's, not a tenth of it; independent errors keep sigma /
    sqrt(n) exactly."""
    from safemanip_ros.grounding import windows
    t = np.arange(10)[None, :] * 0.1
    valid = np.ones((1, 10), bool)
    mean, slope_ = windows.correlated_spreads(t, valid, 0.0)
    assert mean.tolist() == [1.0] and slope_.tolist() == [1.0]
    mean, slope_ = windows.correlated_spreads(t, valid, 2.0)
    assert 2.5 < float(mean[0]) <= math.sqrt(10)
    # Against the spread of an average and of a slope of AR(1) errors, drawn (an error shared by the
    # whole window moves no slope: over 2 s the slope's spread is a little under the independent one's).
    rng = np.random.default_rng(0)
    rho = math.exp(-0.1 / 2.0)
    e = np.zeros((20000, 10))
    e[:, 0] = rng.normal(size=20000)
    for k in range(1, 10):
        e[:, k] = rho * e[:, k - 1] + math.sqrt(1 - rho * rho) * rng.normal(size=20000)
    assert float(e.mean(axis=1).std()) * math.sqrt(10) == pytest.approx(float(mean[0]), rel=0.05)
    tc = t[0] - t[0].mean()
    slopes = e @ tc / float(tc @ tc)
    assert float(slopes.std()) * math.sqrt(float(tc @ tc)) == pytest.approx(float(slope_[0]), rel=0.05)
    # Padding is no sample: the same window with a padded slot gives the same factors.
    padded_t, padded_v = np.concatenate([t, [[9.9]]], axis=1), np.concatenate([valid, [[False]]], axis=1)
    assert windows.correlated_spreads(padded_t, padded_v, 2.0)[0][0] == pytest.approx(float(mean[0]))


@pytest.mark.slow
def test_a_still_cube_under_a_drifting_detector_stays_supported_once_the_drift_is_configured():
    """Detections 10 mm off that drift over 2 s: a still cube's window mean
    shares the drift, so with independent errors assumed its support
    tolerance is a third of what it should be and the cube reads lifted off
    the table on about one frame in twenty; configured
    (``perception.correlation_s``), on under one in a hundred."""
    level = replace(LEVELS['realistic'], name='drift', position_noise_m=0.01, correlation_s=2.0)
    counts = {}
    for correlation_s in (0.0, 2.0):
        track = TrackConfig(position_noise_m=0.01, correlation_s=correlation_s)
        frames = [f for seed in range(10) for f in run(Still(), level, seed, track)[20:]]
        counts[correlation_s] = sum(f['object_supported_cube'] is False for f in frames) / len(frames)
    assert counts[0.0] > 0.02 and counts[2.0] < 0.01, counts


@pytest.mark.slow
def test_the_detections_left_out_as_gross_outliers_are_counted_in_the_input_health():
    """Each detection a still pose leaves out is counted once in the TF
    grounding's input health (a share an operator can watch); clean
    detections leave none out."""
    level = replace(LEVELS['realistic'], name='outliers', outliers=0.05, outlier_m=0.10)
    for lv, seed in ((level, 0), (level, 1), (LEVELS['realistic'], 0)):
        g = TfGrounding(config())
        g.update(0.0, [('world', 'table', (0.0, 0.0, TABLE_Z_M), UP)], static=True)
        det = PoseDetector(lv, ['cube'], seed)
        for k in range(Still.frames):
            t = k / RATE_HZ
            cube, hand, _ = Still()(t)
            g.update(t, [('world', 'hand', tuple(hand), UP)])
            det.observe(t, {'cube': (tuple(cube), UP), 'gripper0_right_eef': (tuple(hand), UP)})
            for d in det.published(t):
                g.update(d.stamp_s, [('world', 'cube', *d.poses['cube'])])
            g.evaluate(t, {'cube': False})
        counted, injected = g.health.gross_outliers, det.outliers_injected
        if lv.outliers:
            assert injected >= 5 and 0.7 * injected <= counted <= injected, (seed, counted, injected)
        else:
            assert counted == injected == 0


@pytest.mark.slow
def test_a_midair_release_reads_as_unsupported_at_once():
    """Let go 10 cm up with the cube hidden by the fingers: the pose the
    gripper last held it at says 'not supported' until a detection shows
    where it fell."""
    for seed in range(4):
        frames = run(Pick(midair=True), LEVELS['realistic'], seed)
        release = 84                                # 4.2 s
        assert frames[release]['object_supported_cube'] is False, seed
        assert frames[release + 1]['object_supported_cube'] is False, seed
        assert all(f['object_supported_cube'] for f in frames[release + 20:]), seed    # landed and seen


def test_an_object_not_seen_for_its_staleness_limit_is_unknown_not_false():
    class Vanishing(Still):
        frames = 100
    level = replace(LEVELS['truth'], rate_hz=20.0)
    g_frames = run(Vanishing(), level)
    assert g_frames[40]['object_stable_cube'] is True
    # Stop detecting at 2.5 s: unknown after 0.5 s (10 frames), never False.
    g = TfGrounding(config())
    g.update(0.0, [('world', 'table', (0.0, 0.0, TABLE_Z_M), UP)], static=True)
    values = []
    for k in range(100):
        t = k / RATE_HZ
        g.update(t, [('world', 'hand', (0.1, 0.3, 1.1), UP)])
        if t < 2.5:
            g.update(t, [('world', 'cube', (0.1, 0.0, TABLE_Z_M + HALF_M), UP)])
        values.append(g.evaluate(t, {'cube': False}))
    for name in ('object_stable_cube', 'object_supported_cube', 'object_settled_cube'):
        assert values[55][name] is True and all(v[name] is None for v in values[62:]), name
        assert all(v[name] is not False for v in values[20:]), name
    assert all(v['object_sync_cube'] is True for v in values)            # not grasped: synced


def test_detections_interleaved_on_tf_are_not_dropped():
    """A detector's message stamped 100 ms before the robot's newest /tf is
    taken (each link keeps its own order); an older sample of the same link
    is still dropped."""
    g = TfGrounding(config())
    g.update(1.0, [('world', 'hand', (0.0, 0.0, 1.0), UP)])
    g.update(0.9, [('world', 'cube', (0.0, 0.0, TABLE_Z_M + HALF_M), UP)])
    assert g.tree.links['cube'].stamps == [0.9] and g.health.out_of_order == 0
    g.update(0.95, [('world', 'cube', (0.0, 0.0, TABLE_Z_M + HALF_M), UP)])
    g.update(0.93, [('world', 'cube', (0.0, 0.0, TABLE_Z_M + HALF_M), UP)])
    assert g.tree.links['cube'].stamps == [0.9, 0.95]


@settings(max_examples=25, deadline=None)
@example(seed=5090, segments=[(0.3, 0.0), (0.0, 0.0)])      # moving from the start: "stable" held 1.1 s before
@example(seed=1384, segments=[(0.0, 0.0), (0.0, 0.0)])      # at rest: one false "sliding", 6 frames
@example(seed=1732, segments=[(0.0, 0.0), (0.0, 0.0), (0.3, 0.0), (0.0, 0.0)])    # "sliding" left 3 frames late
@given(seed=st.integers(0, 2**16), segments=st.lists(st.tuples(st.sampled_from([0.0, 0.3, 0.5]),
                                                               st.floats(0.0, 2 * math.pi)), min_size=2, max_size=5))
@pytest.mark.slow
def test_realistic_perception_agrees_with_the_noise_free_result_away_from_changes(seed, segments):
    """A cube pushed along the table in segments of 2 s (at rest, or at
    0.3-0.5 m/s, beyond the noise floor of a half-second fit to 10 Hz
    detections with 5 mm noise, about 0.12 m/s), in any direction: away
    from the changes (twice the window + latency + 3 frames after each: a
    motion state is entered within about a window and left within about
    two), realistic perception gives the noise-free answer for stable,
    sliding and supported on all but two frames or 2 % of them, or one
    false decision held until the next window of enough detections (a
    decision is about four standard errors from the noise, not
    infinitely many)."""
    seg_frames = 40

    class Segments:
        frames = seg_frames * len(segments)

        def __call__(self, t):
            k = min(int(t * RATE_HZ) // seg_frames, len(segments) - 1)
            pos = np.zeros(2)
            for i in range(k):
                v, a = segments[i]
                pos += v * 2.0 * np.array([math.cos(a), math.sin(a)])
            v, a = segments[k]
            pos += v * (t - k * 2.0) * np.array([math.cos(a), math.sin(a)])
            cube = np.array([*pos, TABLE_Z_M + HALF_M])
            return cube, cube + [0.0, 0.3, 0.3], False

    exact = run(Segments(), LEVELS['truth'], seed)
    noisy = run(Segments(), LEVELS['realistic'], seed)
    settle = 2 * 10 + 2 + 3
    compared, differ = 0, {name: [] for name in ('object_stable_cube', 'object_sliding_cube', 'object_supported_cube')}
    for k in range(len(exact)):
        if k % seg_frames < settle or k < 20:
            continue
        moving = segments[k // seg_frames][0] > 0
        compared += 1
        for name, frames in differ.items():
            if noisy[k][name] != exact[k][name]:
                frames.append((k, noisy[k][name], exact[k][name]))
        assert exact[k]['object_stable_cube'] is (not moving)
    # Decisions sit about 4 standard errors from the noise (a still object reads as moving about once a
    # minute, tracking.NOISE_QUANTILE), and a decision stands until a window holds MIN_SCATTER_SAMPLES
    # detections again: at 10 Hz with misses, up to 0.3 s. Allow two frames or 2 % of them, or one such
    # false decision of up to 6 frames (seed 1384 at rest: one onset at 4 detections, held over 3-detection
    # windows for 6 frames; seed 1732: an exit 3 frames late).
    for name, frames in differ.items():
        stamps = [k for k, _, _ in frames]
        one_run = stamps == list(range(stamps[0], stamps[0] + len(stamps))) if stamps else True
        assert len(frames) <= max(2, compared // 50) or (one_run and len(frames) <= 6), \
            (name, compared, frames[:8])


def test_the_detector_simulates_what_it_says():
    level = LEVELS['realistic']
    det = PoseDetector(level, ['cube'], seed=3)
    truth = ((0.5, 0.0, 0.8), UP)
    got = []
    for k in range(4000):
        t = k / RATE_HZ
        det.observe(t, {'cube': truth, 'gripper0_right_eef': ((0.5, 0.5, 1.0), UP)})
        for d in det.published(t):
            assert d.publish_s - d.stamp_s == pytest.approx(level.latency_s) and d.publish_s <= t + 1e-9
            got.append(d)
    assert len(got) == pytest.approx(2000 * (1 - level.dropout), rel=0.05)      # 10 Hz, 10 % missed
    err = np.array([d.poses['cube'][0] for d in got]) - truth[0]
    assert err.std(axis=0) == pytest.approx([level.position_noise_m] * 3, rel=0.1)
    angles = [np.linalg.norm(log_rotation(_rot(d.poses['cube'][1]))) for d in got]
    assert np.sqrt(np.mean(np.square(angles)) / 3) == pytest.approx(level.orientation_noise_rad, rel=0.1)
    # Between the fingers half the detections are lost on top of the dropout.
    near = PoseDetector(level, ['cube'], seed=3)
    n = 0
    for k in range(4000):
        near.observe(k / RATE_HZ, {'cube': truth, 'gripper0_right_eef': ((0.5, 0.0, 0.82), UP)})
        n += len(near.published(k / RATE_HZ))
    assert n == pytest.approx(2000 * 0.9 * 0.5, rel=0.08)


def _rot(q):
    from safemanip_ros.grounding.poses import quat_to_rot
    return quat_to_rot(np.asarray(q, dtype=float))


def test_track_helpers():
    t = np.array([0.0, 0.1, 0.2, 0.3])
    x = np.stack([2.0 * t, -t, np.zeros(4)], axis=1)
    b, root_sxx, resid = slope(t, x)
    assert b == pytest.approx([2.0, -1.0, 0.0]) and root_sxx == pytest.approx(math.sqrt(0.05)) and resid < 1e-12
    R = _rot((0.0, 0.0, math.sin(0.2), math.cos(0.2)))          # 0.4 rad about z
    assert log_rotation(R) == pytest.approx([0.0, 0.0, 0.4])
    assert mean_rotation([R, R]) == pytest.approx(R)
    track = ObjectTrack(TrackConfig())
    assert not track.run([0.0], [-2], [[]], np.zeros((1, 3, 3)), np.zeros((1, 3)), [False], [None]).known[0]


def _track_inputs(seed: int, frames: int = 240) -> tuple:
    """A tracked cube standing, grasped, lifted and shaken in the grip,
    dropped, then dragged: detections noisy, missed, late and now and then
    grossly wrong, the gripper exact; per frame (time, grasp code,
    detections, gripper R, gripper t, gripper known, gripper motion)."""
    from safemanip_ros.grounding.tracking import Measurement
    rng = np.random.default_rng(seed)
    times = [k / RATE_HZ for k in range(frames)]
    codes, detections, motion = [], [], []
    G_t = np.zeros((frames, 3))
    G_R = np.tile(np.eye(3), (frames, 1, 1))
    ok = [True] * frames
    for k, t in enumerate(times):
        phase = k * 8 // frames                 # 0-1 still, 2-4 grasped and lifted, 5 dropped, 6-7 dragged
        cube = np.array([0.1 + (0.002 * k if phase >= 6 else 0.0), 0.0,
                         0.82 + (0.05 * (k - frames // 4) / frames if 2 <= phase <= 4 else 0.0)])
        G_t[k] = cube + (0.0, 0.0, 0.04 + (0.01 * math.sin(k) if phase == 4 else 0.0))
        codes.append(1 if 2 <= phase <= 4 else (-1 if phase == 5 and k % 3 == 0 else 0))
        ok[k] = rng.random() > 0.05
        motion.append(None if k == 0 or not ok[k] else (float(rng.random() * 0.1), 0.01, 0.0))
        seen = []
        if rng.random() > 0.3:
            p = cube + rng.normal(0.0, 0.005, 3) + (rng.normal(0.0, 0.1, 3) if rng.random() < 0.05 else 0.0)
            angle = rng.normal(0.0, 0.03)
            R = np.array([[math.cos(angle), -math.sin(angle), 0.0], [math.sin(angle), math.cos(angle), 0.0],
                          [0.0, 0.0, 1.0]])
            stamp = t - 0.1 * rng.random()
            seen.append(Measurement(stamp, p, R, p - G_t[k], R, bool(rng.random() > 0.1)))
        detections.append(seen)
    return times, codes, detections, G_R, G_t, ok, motion


@pytest.mark.slow
@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**16), cut=st.lists(st.integers(1, 239), max_size=6))
def test_a_track_run_frame_by_frame_equals_the_same_frames_in_one_run(seed: int, cut: list[int]) -> None:
    """One implementation serves live and offline: the frames of a rollout
    in one run (the audit) and in runs of any length down to one frame
    (live ticks, deferred frames) give the same states bit for bit."""
    times, codes, detections, G_R, G_t, ok, motion = _track_inputs(seed)
    whole = ObjectTrack(TrackConfig()).run(times, codes, detections, G_R, G_t, ok, motion)
    for bounds in (sorted({0, len(times), *cut}), list(range(len(times) + 1))):     # some runs; one a frame
        pieces = ObjectTrack(TrackConfig())
        parts = [pieces.run(times[a:b], codes[a:b], detections[a:b], G_R[a:b], G_t[a:b], ok[a:b], motion[a:b])
                 for a, b in zip(bounds[:-1], bounds[1:])]
        _same_states(parts, whole)
    assert whole.known.sum() > len(times) // 2 and whole.stable[1].any() and whole.sync[1].any()
    assert whole.from_gripper.any() and (whole.known & ~whole.from_gripper).any()


def _same_states(parts: list, whole) -> None:
    for name in ('known', 'p_w', 'R_w', 'position_se_m', 'from_gripper'):
        np.testing.assert_array_equal(np.concatenate([getattr(p, name) for p in parts]), getattr(whole, name), name)
    for name in ('stable', 'sliding', 'sync'):
        for i in range(2):
            np.testing.assert_array_equal(np.concatenate([getattr(p, name)[i] for p in parts]),
                                          getattr(whole, name)[i], name)


def test_doctor_judges_a_pose_source_against_the_perception_thresholds():
    """Measured from what a detector recorded (the object standing still):
    rate from the typical interval, lateness from receive time minus stamp,
    noise from the scatter about a line in still windows."""
    from safemanip_ros.grounding.pose_quality import assess

    def recorded(level, seconds=20.0, seed=0):
        det = PoseDetector(level, ['cube'], seed)
        rows = []
        for k in range(int(seconds * RATE_HZ)):
            t = k / RATE_HZ
            det.observe(t, {'cube': ((0.1, 0.0, 0.82), UP), 'gripper0_right_eef': ((0.1, 0.5, 1.0), UP)})
            rows += [(d.stamp_s, d.publish_s, *d.poses['cube'][0]) for d in det.published(t)]
        a = np.array(rows)
        return a[:, 0], a[:, 1], a[:, 2:]

    good = assess('cube', *recorded(LEVELS['realistic']), TrackConfig())
    assert good.problems == [], good.problems
    assert good.rate_hz == pytest.approx(10.0) and good.latency_s == pytest.approx(0.1)
    assert good.noise_m == pytest.approx(0.005, rel=0.3)
    noisy = assess('cube', *recorded(LEVELS['double']), TrackConfig())
    assert [p for p in noisy.problems if 'noise' in p and 'position_noise_m' in p], noisy.problems
    slow = assess('cube', *recorded(replace(LEVELS['realistic'], rate_hz=4.0)), TrackConfig())
    assert [p for p in slow.problems if 'window_s' in p], slow.problems
    late = assess('cube', *recorded(replace(LEVELS['realistic'], latency_s=0.8)), TrackConfig())
    assert [p for p in late.problems if 'arrive 0.80 s' in p], late.problems
    # Gross outliers (a mis-association, a depth hole): 5 % of the detections 4-8 cm off.
    stamps, received, positions = recorded(LEVELS['realistic'])
    rng = np.random.default_rng(3)
    hit = rng.random(len(positions)) < 0.05
    jumps = rng.normal(size=(len(positions), 3))
    positions[hit] += (jumps / np.linalg.norm(jumps, axis=1, keepdims=True) * rng.uniform(0.04, 0.08, (len(positions), 1)))[hit]
    wild = assess('cube', stamps, received, positions, TrackConfig())
    # Each one found (but one at either end, which has no neighbours on both sides), none more.
    assert wild.outlier_share is not None and hit.sum() >= 4, hit.sum()
    assert abs(wild.outlier_share * len(positions) - hit.sum()) <= 2, (wild.outlier_share, hit.sum())
    assert [p for p in wild.problems if 'gross outliers' in p], wild.problems
    assert good.outlier_share is not None and good.outlier_share < 0.001, good.outlier_share
    assert assess('cube', np.zeros(1), np.zeros(1), np.zeros((1, 3)), TrackConfig()).problems
    # An error that drifts (correlated over 2 s): measured, and a problem until the configuration says so.
    assert good.correlation_s is not None and good.correlation_s < 0.1, good.correlation_s
    drifting = recorded(replace(LEVELS['realistic'], correlation_s=2.0), seconds=60.0)
    drift = assess('cube', *drifting, TrackConfig())
    assert drift.correlation_s is not None and 1.0 < drift.correlation_s < 4.0, drift.correlation_s
    assert [p for p in drift.problems if 'correlation_s' in p], drift.problems
    assert not [p for p in assess('cube', *drifting, TrackConfig(correlation_s=2.0)).problems
                if 'correlation_s' in p]


@pytest.mark.slow
def test_near_and_inside_read_the_tracked_pose_not_the_raw_detection():
    """A still cube 1 cm inside a 5 cm 'near' distance and 1 cm inside a
    box's wall, its detections 5 mm noisy (per axis): near and inside hold
    on every frame though raw detections cross both limits, and 1 cm
    outside they never do."""
    raw_x: list[float] = []

    def frames_for(offset_m: float) -> list[dict]:
        cfg = replace(config(), near={'cube_mark': ('cube', 'mark', 0.05)},
                      inside={'cube_in_tray': ('cube', 'tray', (-0.2, -0.2, -0.1), (0.05, 0.2, 0.1))})
        g = TfGrounding(cfg)
        g.update(0.0, [('world', 'table', (0.0, 0.0, TABLE_Z_M), UP), ('world', 'mark', (0.0, 0.0, 0.82), UP),
                       ('world', 'tray', (0.0, 0.0, 0.82), UP)], static=True)
        det = PoseDetector(LEVELS['realistic'], ['cube'], seed=5)
        cube = (0.05 + offset_m, 0.0, TABLE_Z_M + HALF_M)
        out = []
        for k in range(400):
            t = k / RATE_HZ
            g.update(t, [('world', 'hand', (0.0, 0.5, 1.1), UP)])
            det.observe(t, {'cube': (cube, UP), 'gripper0_right_eef': ((0.0, 0.5, 1.1), UP)})
            for d in det.published(t):
                g.update(d.stamp_s, [('world', 'cube', *d.poses['cube'])])
                raw_x.append(d.poses['cube'][0][0])
            out.append(g.evaluate(t, {'cube': False}))
        return out[20:]
    inside = frames_for(-0.01)
    assert max(raw_x) > 0.05          # a raw detection outside both limits
    assert all(f['near_cube_mark'] is True and f['inside_cube_in_tray'] is True for f in inside)
    raw_x.clear()
    outside = frames_for(+0.01)
    assert min(raw_x) < 0.05
    assert all(f['near_cube_mark'] is False and f['inside_cube_in_tray'] is False for f in outside)


def test_doctor_refuses_pose_sources_it_cannot_judge():
    """All NaN, stamped in the future, running backwards, or 2 poses in 3 s (was: '20 Hz', no problem)."""
    from safemanip_ros.grounding.pose_quality import assess
    t = np.arange(0.0, 5.0, 0.1)
    still = np.tile([0.1, 0.0, 0.82], (len(t), 1))
    assert assess('cube', t, t + 0.05, still, TrackConfig()).problems == []
    nan = assess('cube', t, t + 0.05, np.full((len(t), 3), np.nan), TrackConfig())
    assert any(f'{len(t)} of {len(t)} poses are not finite numbers (NaN or infinite): none can be used' in p
               for p in nan.problems), nan.problems
    future = assess('cube', t + 3600.0, t + 0.05, still, TrackConfig())
    assert any('stamped up to 3599.95 s after they arrived' in p for p in future.problems), future.problems
    back = assess('cube', t[::-1].copy(), t + 0.05, still, TrackConfig())
    assert any(f'stamps go backwards {len(t) - 1} time(s) in arrival order' in p for p in back.problems)
    sparse = assess('cube', np.array([0.0, 0.05]), np.array([0.1, 3.0]), still[:2], TrackConfig())
    assert any('only 2 usable poses over 0.05 s: too few to estimate a rate' in p for p in sparse.problems)
