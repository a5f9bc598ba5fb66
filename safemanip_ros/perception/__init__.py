"""Object poses from camera images: what a cell's perception stack publishes on TF.

* :mod:`.colour_depth` — an RGB-D frame to object positions: colour
  segmentation (HSV ranges), depth back-projection, a robust centre.

Pure (numpy, OpenCV): the simulator's camera level (``sim/perception.py``)
and a perception node call the same functions.
"""

__all__ = ['colour_depth']
