"""The one error type of :mod:`safemanip_ros.bag` (as rosbags has
``ReaderError``): every message names the bag or file and the problem."""

from __future__ import annotations

from ..errors import SafemanipError


class BagError(SafemanipError):
    """A bag that cannot be read, written or repaired."""


class BagReadError(BagError):
    """A bag that cannot be opened for reading (names the bag and the reason)."""


class BagMessageError(BagError):
    """A message whose bytes do not deserialize (names the bag, topic and bag time)."""
