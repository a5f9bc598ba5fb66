"""The one way to find the package's resources: configuration (property
suites, ontologies, scenes, robot configurations, parameters), message
definitions and benchmarks.

* In a source checkout (the pip/venv set-up installs the sources editable)
  they are next to the Python package: ``<repo>/config``, ``<repo>/msg``.
* Installed by colcon they are in the package's share directory, found
  through the ament index (``ament_index_python``), as ROS 2 launch files do:
  ``<prefix>/share/safemanip_ros/config`` and ``.../msg``.  Should the index
  not be set up (the install space's ``local_setup`` not sourced), the
  prefix is found from this file's location (``<prefix>/lib/pythonX.Y/
  site-packages/safemanip_ros``).

Raises :class:`ResourceError` naming where it looked.
"""

from __future__ import annotations

import functools
from pathlib import Path

from .errors import SafemanipError

PACKAGE = 'safemanip_ros'


class ResourceError(SafemanipError):
    """A resource of the package that cannot be found (names where it looked)."""


def _source_root() -> Path | None:
    root = Path(__file__).resolve().parents[1]
    return root if (root / 'package.xml').is_file() and (root / 'config').is_dir() else None


@functools.lru_cache(maxsize=1)
def share_dir() -> Path:
    """The directory holding ``config/`` and ``msg/``."""
    root = _source_root()
    if root is not None:
        return root
    looked = []
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
        try:
            return Path(get_package_share_directory(PACKAGE))
        except PackageNotFoundError:
            looked.append('the ament index (AMENT_PREFIX_PATH)')
    except ImportError:
        looked.append('the ament index (ament_index_python is not installed)')
    for parent in Path(__file__).resolve().parents:
        candidate = parent / 'share' / PACKAGE
        if (candidate / 'package.xml').is_file():
            return candidate
    looked.append(f'share/{PACKAGE} above {Path(__file__).resolve().parent}')
    raise ResourceError(f'cannot find the resources of {PACKAGE}: looked in the source tree, {", ".join(looked)}')


def config_dir() -> Path:
    """``config/``: property suites, ontologies, scenes, robots, parameters."""
    return share_dir() / 'config'


def config_path(*parts: str) -> Path:
    """A path under ``config/``, e.g. ``config_path('properties', 'safemanip.yaml')``."""
    return config_dir().joinpath(*parts)


def default_suites() -> list[Path]:
    """The property suites monitored when none is named: SafeManip's suite
    and the physical suite beside it."""
    return [config_path('properties', 'safemanip.yaml'), config_path('properties', 'physical.yaml')]


PROFILES = ('default', 'safemanip-compat')
"""``--profile``: ``default`` monitors our corrected semantics; ``safemanip-compat``
reproduces SafeManip's released monitor (its onset devices, timers and
episode rules, ``config/properties/safemanip_compat.yaml``)."""


def profile_suites(profile: str) -> list[Path]:
    """The suites a profile monitors when no ``--properties`` are named."""
    if profile == 'safemanip-compat':
        return [config_path('properties', 'safemanip_compat.yaml')]
    return default_suites()


def msg_dir() -> Path:
    """The ``.msg`` definitions of our interfaces."""
    return share_dir() / 'msg'


def bench_dir() -> Path:
    """``bench/`` (source checkouts only: benchmarks are not installed)."""
    root = _source_root()
    if root is None or not (root / 'bench').is_dir():
        raise ResourceError('the benchmarks (bench/) exist in a source checkout only')
    return root / 'bench'
