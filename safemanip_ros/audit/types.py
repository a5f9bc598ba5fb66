"""A rosbags type store that knows ROS 2 Kilted's standard messages and ours
(from msg/), so bags of our topics are written and read without ROS."""

from __future__ import annotations

import functools
from pathlib import Path

from rosbags.typesys import Stores, get_types_from_msg, get_typestore

PACKAGE = 'safemanip_ros'


def _msg_dir() -> Path:
    here = Path(__file__).resolve()
    for candidate in (here.parents[2] / 'msg',                          # source checkout
                      here.parents[4] / 'share' / PACKAGE / 'msg'):     # colcon install prefix
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f'message definitions of {PACKAGE} not found next to {here}')


@functools.lru_cache(maxsize=1)
def typestore():
    store = get_typestore(Stores.ROS2_KILTED)
    types = {}
    for path in sorted(_msg_dir().glob('*.msg')):
        types.update(get_types_from_msg(path.read_text(), f'{PACKAGE}/msg/{path.stem}'))
    store.register(types)
    return store
