"""Object positions from an RGB-D frame (grounding/colour_depth.py), on
synthetic frames whose answer is known exactly: the pinhole geometry
through a turned camera, hue ranges that wrap through red, the largest
region rather than a stray pixel, the silhouette's mixed depth left out, and
an object too hidden not reported at all."""

from __future__ import annotations

import math

import numpy as np
import pytest

from safemanip_ros.grounding.colour_depth import ObjectLook, locate

RED = ObjectLook('cube', (172, 100, 40), (8, 255, 255), 0.02)
GREEN = ObjectLook('block', (40, 80, 30), (85, 255, 255), 0.0)
K = np.array([[100.0, 0.0, 32.0], [0.0, 100.0, 32.0], [0.0, 0.0, 1.0]])


def _frame(squares: list[tuple[int, int, int, tuple[int, int, int], float]], background_m: float = 1.5):
    """A white 64×64 frame at ``background_m`` with squares (row, col, side, rgb, depth m)."""
    rgb = np.full((64, 64, 3), 240, np.uint8)
    depth = np.full((64, 64), background_m, np.float32)
    for r, c, side, colour, z in squares:
        rgb[r:r + side, c:c + side] = colour
        depth[r:r + side, c:c + side] = z
    return rgb, depth


def test_a_square_is_placed_through_the_pinhole_and_a_turned_camera():
    # A 10-px red square centred on pixel (40, 20) at 1 m: the optical-frame point ((20-32)/100, (40-32)/100, 1).
    rgb, depth = _frame([(35, 15, 10, (200, 20, 20), 1.0)])
    surface = np.array([-0.12, 0.08, 1.0])
    centre = surface + surface / np.linalg.norm(surface) * RED.centre_behind_m
    # The camera 2 m up, looking straight down (optical z = world -z, x = world x, y = world -y).
    down = ((0.0, 0.0, 2.0), (1.0, 0.0, 0.0, 0.0))
    (found,) = locate(rgb, depth, K, down, [RED]).values()
    assert found.position_m == pytest.approx((centre[0], -centre[1], 2.0 - centre[2]), abs=1e-9)
    assert found.pixels == 64                      # 10×10 less its one-pixel rim
    # Turned 90 degrees about the optical axis: the same point, the x and y of the world swapped.
    turned = ((0.0, 0.0, 0.0), (0.0, 0.0, math.sin(math.pi / 4), math.cos(math.pi / 4)))
    (found,) = locate(rgb, depth, K, turned, [RED]).values()
    assert found.position_m == pytest.approx((-centre[1], centre[0], centre[2]), abs=1e-9)


def test_the_largest_region_counts_its_rim_and_strays_do_not():
    # The object, a stray red pixel far off, and a rim whose depth is the background's (a silhouette).
    rgb, depth = _frame([(20, 20, 12, (30, 200, 40), 0.8), (2, 60, 2, (30, 200, 40), 0.3)])
    depth[20, 20:32] = 1.5                          # the top row's depth mixes in the table behind
    (found,) = locate(rgb, depth, K, ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)), [GREEN]).values()
    assert found.position_m[2] == pytest.approx(0.8)
    assert found.position_m[0] == pytest.approx((26 - 32) / 100 * 0.8)


def test_hue_wraps_through_red_and_an_object_too_hidden_or_without_depth_is_not_reported():
    magenta_red, orange_red = (200, 10, 40), (200, 40, 10)       # hue near 175 and near 5
    for colour in (magenta_red, orange_red):
        rgb, depth = _frame([(10, 10, 8, colour, 1.0)])
        assert 'cube' in locate(rgb, depth, K, ((0, 0, 0), (0, 0, 0, 1)), [RED])
    rgb, depth = _frame([(10, 10, 3, magenta_red, 1.0)])        # 9 pixels: fewer than min_pixels
    assert locate(rgb, depth, K, ((0, 0, 0), (0, 0, 0, 1)), [RED]) == {}
    rgb, depth = _frame([(10, 10, 8, magenta_red, 1.0)])
    depth[10:18, 10:18] = np.nan                                  # a depth hole: no position, never a guess
    assert locate(rgb, depth, K, ((0, 0, 0), (0, 0, 0, 1)), [RED, GREEN]) == {}


def test_rgbd_pairs_pair_by_stamp_in_either_order_and_say_what_they_cannot_use():
    """An image waits for its depth image of the same stamp (or the other way),
    at most ``kept`` of each kind; a pair before any CameraInfo, or of two
    sizes, is a problem in words; with the camera's pose in the world the
    objects are placed there."""
    from safemanip_ros.grounding.colour_depth import ObjectLook, RgbdPairs
    red = ObjectLook('cube', (0, 120, 60), (8, 255, 255), 0.0)
    rgb = np.full((8, 8, 3), 255, np.uint8)
    rgb[2:6, 2:6] = (200, 20, 20)
    depth = np.full((8, 8), 1.0, np.float32)
    K = np.array([[8.0, 0, 4], [0, 8.0, 4], [0, 0, 1]])
    pairs = RgbdPairs([red], kept=2, min_pixels=4)
    assert pairs.add('depth', 1, 'cam', depth) is None
    assert pairs.add('image', 1, 'cam', rgb).problem == 'no camera_info yet; RGB-D pairs skipped'
    pairs.set_intrinsics(K)
    assert pairs.add('depth', 2, 'cam', depth) is None
    assert pairs.add('image', 2, 'cam', rgb).found['cube'].position_m == (0.0, 0.0, 1.0)
    for stamp in (3, 4, 5):                       # three images with no depth: the oldest is dropped
        assert pairs.add('image', stamp, 'cam', rgb) is None
    assert pairs.add('depth', 3, 'cam', depth) is None          # its image is gone: this depth waits instead
    assert pairs.add('depth', 5, 'cam', depth).found
    bad = pairs.add('depth', 4, 'cam', np.ones((4, 4), np.float32))
    assert bad.problem == 'image 8x8 and depth 4x4 are not one aligned RGB-D pair' and not bad.found
    # The camera 2 m above the world's origin looking down (optical z along the world's -z), on TF.
    from safemanip_ros.grounding.tf import TransformTree
    tree = TransformTree()
    tree.set_transform('world', 'cam', 0.0, (0.0, 0.0, 2.0), (1.0, 0.0, 0.0, 0.0), static=True)
    pairs.add('image', 6, 'cam', rgb)
    placed = pairs.add('depth', 6, 'cam', depth, world=(tree, 'world'))
    assert placed.frame_id == 'world'
    [(parent, child, position, rotation)] = placed.transforms()
    assert (parent, child, rotation) == ('world', 'cube', (0.0, 0.0, 0.0, 1.0))
    assert np.allclose(position, (0.0, 0.0, 1.0), atol=1e-12), position
    pairs.add('image', 7, 'cam', rgb)
    unknown = pairs.add('depth', 7, 'cam', depth, world=(TransformTree(), 'world'))
    assert unknown.problem == 'no pose of cam in world at the capture' and not unknown.found
