"""Camera grounding with OpenCV: fiducial marker poses and colour-region occupancy.

* :func:`image_to_array` converts a ``sensor_msgs/Image`` payload (encoding,
  height, width, step, data) to a numpy array without cv_bridge; supported
  encodings are rgb8, bgr8, mono8 and 16UC1, anything else raises
  :class:`CameraError` naming the encoding.
* :class:`MarkerDetector` finds ArUco/AprilTag markers (``cv2.aruco``) and
  estimates each marker's pose in the camera optical frame with ``solvePnP``
  (IPPE_SQUARE) from the ``CameraInfo`` intrinsics and the marker's side
  length — entity poses for the TF predicates on hardware without privileged
  state.
* :class:`CameraGrounding` evaluates ``region_occupied_<name>``: the share of
  pixels of a configured image rectangle whose HSV colour lies in a range is
  at least ``min_fraction``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..errors import SafemanipError
from .base import Freshness, InputHealth, Predicates, all_unknown
from .colour_depth import ObjectLook

SUPPORTED_ENCODINGS = ('rgb8', 'bgr8', 'mono8', '16UC1', '32FC1')


class CameraError(SafemanipError):
    """An image the camera grounding cannot use (names the problem)."""


def image_to_array(encoding: str, height: int, width: int, step: int, data: bytes | bytearray | memoryview,
                   is_bigendian: bool = False) -> np.ndarray:
    """The image as ``uint8[h, w, 3]`` (RGB order) for colour, ``uint8[h, w]``
    for mono8, ``uint16[h, w]`` for 16UC1 or ``float32[h, w]`` for 32FC1."""
    if encoding not in SUPPORTED_ENCODINGS:
        raise CameraError(f'unsupported image encoding {encoding!r}; supported: {", ".join(SUPPORTED_ENCODINGS)}')
    pixel: dict[str, tuple[int, np.dtype[Any]]] = {
        'rgb8': (3, np.dtype(np.uint8)), 'bgr8': (3, np.dtype(np.uint8)), 'mono8': (1, np.dtype(np.uint8)),
        '16UC1': (1, np.dtype('>u2') if is_bigendian else np.dtype('<u2')),
        '32FC1': (1, np.dtype('>f4') if is_bigendian else np.dtype('<f4'))}
    channels, dtype = pixel[encoding]
    itemsize = dtype.itemsize
    row_bytes = width * channels * itemsize
    if step < row_bytes or len(data) < step * height:
        raise CameraError(f'{encoding} image {width}x{height}: step {step} and {len(data)} data bytes are too '
                          f'small (need step >= {row_bytes} and {step * height} bytes)')
    buf = np.frombuffer(data, dtype=np.uint8, count=step * height).reshape(height, step)[:, :row_bytes]
    img = np.ascontiguousarray(buf).view(dtype).reshape(height, width, channels) if channels > 1 else \
        np.ascontiguousarray(buf).view(dtype).reshape(height, width)
    if encoding == 'bgr8':
        img = img[:, :, ::-1]
    if encoding == '32FC1':
        return img.astype(np.float32)
    return img.astype(np.uint16) if encoding == '16UC1' else np.ascontiguousarray(img)


def depth_metres(encoding: str, image: np.ndarray) -> np.ndarray:
    """A depth image as ``float32[h, w]`` metres along the optical axis, NaN
    where unknown: ``32FC1`` is metres already (REP 118), ``16UC1`` millimetres
    with 0 for no reading (a RealSense's or Kinect's aligned depth)."""
    if encoding == '32FC1':
        out = image.astype(np.float32, copy=True)
        out[~(out > 0)] = np.nan          # 0, negative and NaN: no reading
        return out
    if encoding == '16UC1':
        mm = image.astype(np.float32)
        mm[mm == 0] = np.nan
        return mm / 1000.0
    raise CameraError(f'a depth image is 32FC1 (m) or 16UC1 (mm), not {encoding!r}')


@dataclass(frozen=True)
class MarkerPose:
    marker_id: int
    translation_m: np.ndarray        # in the camera optical frame
    rotation: np.ndarray             # 3x3
    corners_px: np.ndarray


class MarkerDetector:
    def __init__(self, dictionary: str = 'DICT_4X4_50', marker_size_m: float = 0.05) -> None:
        import cv2

        if not hasattr(cv2.aruco, dictionary):
            raise CameraError(f'unknown marker dictionary {dictionary!r} (e.g. DICT_4X4_50, DICT_APRILTAG_36h11)')
        self._cv2 = cv2
        params = cv2.aruco.DetectorParameters()
        params.cornerRefinementMethod = cv2.aruco.CORNER_REFINE_SUBPIX
        self.detector = cv2.aruco.ArucoDetector(cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, dictionary)),
                                                params)
        self.marker_size_m = marker_size_m
        h = marker_size_m / 2
        self._object_points = np.array([[-h, h, 0], [h, h, 0], [h, -h, 0], [-h, -h, 0]], dtype=np.float32)

    def detect(self, image: np.ndarray, camera_matrix: np.ndarray, distortion: Sequence[float]) -> list[MarkerPose]:
        cv2 = self._cv2
        gray = image if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
        if gray.dtype != np.uint8:
            gray = cv2.convertScaleAbs(gray, alpha=255.0 / max(1, int(gray.max())))
        corners, ids, _ = self.detector.detectMarkers(gray)
        out = []
        if ids is None:
            return out
        K = np.asarray(camera_matrix, dtype=np.float64).reshape(3, 3)
        dist = np.asarray(distortion, dtype=np.float64)
        for c, marker_id in zip(corners, ids.ravel()):
            img_pts = c.reshape(4, 2).astype(np.float64)
            # A planar square has two pose solutions that can reproject almost
            # equally well when it faces the camera; refine both and keep the
            # one with the smaller reprojection error.
            n, rvecs, tvecs, _ = cv2.solvePnPGeneric(self._object_points, img_pts, K, dist,
                                                      flags=cv2.SOLVEPNP_IPPE_SQUARE)
            best = None
            for rvec, tvec in zip(rvecs[:n], tvecs[:n]):
                rvec, tvec = cv2.solvePnPRefineLM(self._object_points, img_pts, K, dist, rvec.copy(), tvec.copy())
                proj, _ = cv2.projectPoints(self._object_points, rvec, tvec, K, dist)
                err = float(np.linalg.norm(proj.reshape(4, 2) - img_pts))
                if best is None or err < best[0]:
                    best = (err, rvec, tvec)
            if best is not None:
                R, _ = cv2.Rodrigues(best[1])
                out.append(MarkerPose(int(marker_id), best[2].ravel(), R, img_pts))
        return out


@dataclass
class ColourRegion:
    """An image rectangle (pixels, x0 <= x < x1) and an HSV range (OpenCV
    scale: H 0-179, S and V 0-255)."""

    x0: int
    y0: int
    x1: int
    y1: int
    hsv_low: tuple[int, int, int]
    hsv_high: tuple[int, int, int]
    min_fraction: float = 0.2


@dataclass
class CameraConfig:
    """``regions``: colour-region predicates; ``objects``: objects found by
    colour and depth in an RGB-D pair and published on TF
    (:mod:`safemanip_ros.grounding.colour_depth`)."""

    regions: dict[str, ColourRegion] = field(default_factory=dict)
    staleness_s: float = 0.5
    objects: list[ObjectLook] = field(default_factory=list)


class CameraGrounding:
    def __init__(self, config: CameraConfig) -> None:
        import cv2

        self._cv2 = cv2
        self.config = config
        self.freshness = Freshness(config.staleness_s)
        self.names = [f'region_occupied_{n}' for n in sorted(config.regions)]
        self._values: Predicates | None = None

    @property
    def health(self) -> InputHealth:
        return self.freshness.health

    def update(self, stamp_s: float, image_rgb: np.ndarray) -> None:
        if not self.freshness.accept(stamp_s):
            return
        cv2 = self._cv2
        if image_rgb.ndim != 3:
            self._values = {n: None for n in self.names}   # colour regions need a colour image
            self.health.missing_inputs += 1
            return
        hsv = cv2.cvtColor(image_rgb, cv2.COLOR_RGB2HSV)
        values: Predicates = {}
        h, w = hsv.shape[:2]
        for name, r in sorted(self.config.regions.items()):
            x0, x1, y0, y1 = max(0, r.x0), min(w, r.x1), max(0, r.y0), min(h, r.y1)
            if x1 <= x0 or y1 <= y0:
                values[f'region_occupied_{name}'] = None
                continue
            roi = hsv[y0:y1, x0:x1]
            mask = cv2.inRange(roi, np.array(r.hsv_low, np.uint8), np.array(r.hsv_high, np.uint8))
            values[f'region_occupied_{name}'] = bool(np.count_nonzero(mask) >= r.min_fraction * mask.size)
        self._values = values

    def evaluate(self, now_s: float) -> Predicates:
        if self._values is None or not self.freshness.fresh(now_s):
            return all_unknown(self.names)
        return dict(self._values)
