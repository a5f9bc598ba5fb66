"""Camera grounding on images rendered in the test with OpenCV: markers at
known poses are found within 1 cm / 2 degrees at 0.5 m; colour regions;
image encodings."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from safemanip_ros.grounding.camera import (
    CameraConfig,
    CameraError,
    CameraGrounding,
    ColourRegion,
    MarkerDetector,
    image_to_array,
)

W, H = 640, 480
K = np.array([[600.0, 0, 320], [0, 600.0, 240], [0, 0, 1]])
SIZE_M = 0.10


def render(poses: dict[int, tuple[np.ndarray, np.ndarray]], dictionary=cv2.aruco.DICT_4X4_50) -> np.ndarray:
    """RGB image with each marker id drawn at pose (R, t) in the camera frame."""
    canvas = np.full((H, W, 3), 255, np.uint8)
    d = cv2.aruco.getPredefinedDictionary(dictionary)
    h = SIZE_M / 2
    for marker_id, (R, t) in poses.items():
        tile = cv2.aruco.generateImageMarker(d, marker_id, 240)
        tile = cv2.copyMakeBorder(tile, 40, 40, 40, 40, cv2.BORDER_CONSTANT, value=255)  # quiet zone
        rvec, _ = cv2.Rodrigues(R)
        border = h * 320 / 240      # the marker's black square is 240 of the 320 tile pixels
        quiet = np.array([[-border, border, 0], [border, border, 0], [border, -border, 0], [-border, -border, 0]])
        img_pts, _ = cv2.projectPoints(quiet, rvec, t, K, None)
        src = np.array([[0, 0], [319, 0], [319, 319], [0, 319]], dtype=np.float32)
        M = cv2.getPerspectiveTransform(src, img_pts.reshape(4, 2).astype(np.float32))
        warped = cv2.warpPerspective(cv2.cvtColor(tile, cv2.COLOR_GRAY2RGB), M, (W, H), flags=cv2.INTER_LINEAR,
                                     borderValue=(0, 0, 0))
        mask = cv2.warpPerspective(np.full((320, 320), 255, np.uint8), M, (W, H)) > 0
        canvas[mask] = warped[mask]
    return canvas


def rot(axis: str, deg: float) -> np.ndarray:
    v = {'x': [1, 0, 0], 'y': [0, 1, 0], 'z': [0, 0, 1]}[axis]
    R, _ = cv2.Rodrigues(np.array(v, float) * math.radians(deg))
    return R


@pytest.mark.parametrize('tilt', [0.0, 20.0])
def test_marker_poses_within_1cm_2deg_at_half_a_metre(tilt):
    facing = rot('x', 180)   # OpenCV's marker frame: z out of the face, y up: facing the camera = 180 deg about x
    poses = {
        3: (rot('x', tilt) @ facing, np.array([-0.12, -0.08, 0.5])),
        7: (rot('y', -tilt) @ rot('z', 30) @ facing, np.array([0.13, -0.08, 0.5])),
        11: (rot('x', -tilt / 2) @ facing, np.array([0.12, 0.1, 0.55])),
        19: (rot('z', -45) @ facing, np.array([-0.12, 0.1, 0.45])),
    }
    found = {m.marker_id: m for m in MarkerDetector('DICT_4X4_50', SIZE_M).detect(render(poses), K, [0] * 5)}
    assert set(found) == set(poses)
    for mid, (R, t) in poses.items():
        est = found[mid]
        assert np.linalg.norm(est.translation_m - t) < 0.01, (mid, est.translation_m, t)
        angle = math.degrees(math.acos(max(-1, min(1, (np.trace(R.T @ est.rotation) - 1) / 2))))
        assert angle < 2.0, (mid, angle)


def test_apriltag_dictionary_and_unknown_dictionary():
    poses = {5: (rot('x', 180), np.array([0.0, 0.0, 0.5]))}
    img = render(poses, cv2.aruco.DICT_APRILTAG_36h11)
    found = MarkerDetector('DICT_APRILTAG_36h11', SIZE_M).detect(img, K, [0] * 5)
    assert [m.marker_id for m in found] == [5]
    with pytest.raises(CameraError, match='unknown marker dictionary'):
        MarkerDetector('DICT_NOPE')


def test_colour_region_occupancy():
    img = np.full((H, W, 3), 255, np.uint8)
    cv2.rectangle(img, (100, 100), (200, 200), (255, 0, 0), -1)          # red patch (RGB)
    cfg = CameraConfig(regions={
        'bin_a': ColourRegion(90, 90, 210, 210, (0, 120, 70), (10, 255, 255), 0.5),
        'bin_b': ColourRegion(300, 300, 400, 400, (0, 120, 70), (10, 255, 255), 0.5),
    })
    g = CameraGrounding(cfg)
    assert g.evaluate(0.0) == {'region_occupied_bin_a': None, 'region_occupied_bin_b': None}
    g.update(0.0, img)
    assert g.evaluate(0.1) == {'region_occupied_bin_a': True, 'region_occupied_bin_b': False}
    assert g.evaluate(1.0) == {'region_occupied_bin_a': None, 'region_occupied_bin_b': None}   # stale


def test_image_encodings():
    rgb = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    assert (image_to_array('rgb8', 2, 3, 9, rgb.tobytes()) == rgb).all()
    assert (image_to_array('bgr8', 2, 3, 9, rgb[:, :, ::-1].copy().tobytes()) == rgb).all()
    padded = np.zeros((2, 12), np.uint8)       # rows padded to a 12-byte step
    padded[:, :9] = rgb.reshape(2, 9)
    assert (image_to_array('rgb8', 2, 3, 12, padded.tobytes()) == rgb).all()
    mono = np.array([[1, 2], [3, 4]], np.uint8)
    assert (image_to_array('mono8', 2, 2, 2, mono.tobytes()) == mono).all()
    depth = np.array([[1000, 65535]], np.uint16)
    assert (image_to_array('16UC1', 1, 2, 4, depth.astype('<u2').tobytes()) == depth).all()
    assert (image_to_array('16UC1', 1, 2, 4, depth.astype('>u2').tobytes(), is_bigendian=True) == depth).all()
    with pytest.raises(CameraError, match="unsupported image encoding 'yuv422'.*rgb8, bgr8, mono8, 16UC1"):
        image_to_array('yuv422', 2, 2, 4, bytes(8))
    with pytest.raises(CameraError, match='too small'):
        image_to_array('rgb8', 2, 3, 9, bytes(10))


def test_depth_images_read_as_metres_with_no_reading_unknown():
    """REP 118: 32FC1 in metres; a RealSense's 16UC1 in millimetres, 0 for no reading; both NaN where unknown."""
    from safemanip_ros.grounding.camera import depth_metres
    mm = np.array([[0, 1000], [1500, 65535]], '<u2')
    got = depth_metres('16UC1', image_to_array('16UC1', 2, 2, 4, mm.tobytes()))
    assert np.isnan(got[0, 0]) and got[0, 1] == 1.0 and got[1, 0] == 1.5
    metres = np.array([[0.0, 0.7], [np.nan, -1.0]], '<f4')
    got = depth_metres('32FC1', image_to_array('32FC1', 2, 2, 8, metres.tobytes()))
    assert got.dtype == np.float32 and got[0, 1] == pytest.approx(0.7)
    assert np.isnan(got[0, 0]) and np.isnan(got[1, 0]) and np.isnan(got[1, 1])
    big_endian = np.array([[2.5]], '>f4')
    assert depth_metres('32FC1', image_to_array('32FC1', 1, 1, 4, big_endian.tobytes(), is_bigendian=True))[0, 0] == 2.5
    with pytest.raises(CameraError, match='32FC1 \\(m\\) or 16UC1 \\(mm\\)'):
        depth_metres('rgb8', np.zeros((1, 1, 3), np.uint8))


def test_camera_objects_are_checked_where_the_configuration_gives_them(tmp_path):
    """``camera.objects``: an entity's colour (hue may wrap through red), its
    centre behind its faces by default the shape's smallest half extent; a
    bad range or an unknown entity is one error naming the place."""
    from conftest import REPO

    from safemanip_ros.errors import SpecError
    from safemanip_ros.grounding.config import load_robot_config
    base = (REPO / 'config' / 'robots' / 'robosuite_lift.yaml').read_text()
    (cube,) = load_robot_config(REPO / 'config' / 'robots' / 'robosuite_lift.yaml').camera.objects
    assert (cube.name, cube.hsv_low, cube.hsv_high, cube.centre_behind_m) == \
        ('cube_main', (172, 100, 40), (8, 255, 255), 0.021)
    for bad, words in [('cube: {hsv_low: [172, 100, 40], hsv_high: [8, 255, 300]}', 'outside OpenCV'),
                       ('cube: {hsv_low: [0, 200, 40], hsv_high: [8, 100, 255]}', 'must not exceed'),
                       ('mug: {hsv_low: [0, 100, 40], hsv_high: [8, 255, 255]}', 'not an entity (cube, table)'),
                       ('cube: {hsv_low: [0, 100], hsv_high: [8, 255, 255]}', '[h, s, v]')]:
        path = tmp_path / 'robot.yaml'
        path.write_text(base.replace("    cube: {hsv_low: [172, 100, 40], hsv_high: [8, 255, 255]}", f'    {bad}'))
        with pytest.raises(SpecError, match=None) as err:
            load_robot_config(path)
        assert words in str(err.value) and 'robot.yaml' in str(err.value), str(err.value)
