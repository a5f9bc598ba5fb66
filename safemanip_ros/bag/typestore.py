"""A rosbags type store that knows ROS 2 Kilted's standard messages and ours
(from msg/), so bags of our topics are written and read without ROS."""

from __future__ import annotations

import functools
from typing import Any

from rosbags.typesys import Stores, get_types_from_msg, get_typestore

from ..resources import msg_dir

PACKAGE = 'safemanip_ros'


@functools.lru_cache(maxsize=1)
def typestore() -> Any:
    store = get_typestore(Stores.ROS2_KILTED)
    types = {}
    for path in sorted(msg_dir().glob('*.msg')):
        types.update(get_types_from_msg(path.read_text(), f'{PACKAGE}/msg/{path.stem}'))
    store.register(types)
    return store
