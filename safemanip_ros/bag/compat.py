"""Everything this project knows of rosbags beyond its public API, in one place.

The public API we use — ``rosbags.rosbag2.Reader``/``Writer``/``ReaderError``,
``rosbags.typesys`` and ``rosbags.serde`` — is stable across releases.  What
sits here is not: two patches that make opening a bag cheaper
(:func:`tune_rosbags`) and the MCAP reader's internals that
:mod:`safemanip_ros.bag.bulk` walks chunk by chunk.  Each is looked up by
name and degrades to rosbags' own behaviour where a release lacks it; the
range of releases these were written against is :data:`OLDEST` up to :data:`BEFORE` (the
requirements pin the same range, and ``test/test_bag_compat.py`` checks the
assumptions at both of its ends).
"""

from __future__ import annotations

import functools
import importlib
import json
from typing import Any

from ..json_keys import unique_keys

OLDEST = '0.11.6'
"""The oldest release supported: the first whose MCAP reader exposes
``decompress`` and ``read_exact`` (and has Kilted's type store, from 0.10.10)."""
BEFORE = '0.12'
"""The first release not supported (a new minor series may move internals).
The requirements pin ``rosbags>=OLDEST,<BEFORE``; set-up installs OLDEST
beside the venv's newest so that ``test/test_bag_compat.py`` runs the bag
tests at both ends."""


def rosbags_version() -> str:
    from importlib.metadata import version
    return version('rosbags')


def is_directory_reader(storage: Any) -> bool:
    """Whether ``Reader.storage`` is rosbags' split-folder reader (whose
    ``storages`` are the per-file readers :mod:`.bulk` walks), and this
    rosbags has all that the bulk read reuses; where not, every message is
    read through rosbags' own ``Reader.messages``."""
    cls = getattr(_module('reader'), 'DirectoryReader', None)
    return cls is not None and isinstance(storage, cls) and bulk_readable()


@functools.lru_cache(maxsize=1)
def bulk_readable() -> bool:
    """Whether this rosbags has the MCAP internals :mod:`.bulk` reuses."""
    mcap = _module('storage_mcap')
    return all(hasattr(mcap, name) for name in ('McapReader', 'decompress', 'deserialize_uint32', 'read_exact'))


def is_mcap_reader(storage: Any) -> bool:
    """Whether one split file's reader is rosbags' MCAP reader."""
    cls = getattr(_module('storage_mcap'), 'McapReader', None)
    return cls is not None and isinstance(storage, cls)


def mcap_chunk_readers() -> tuple[Any, Any, Any]:
    """rosbags' ``(decompress, deserialize_uint32, read_exact)`` of its MCAP
    reader: the chunk decoding :mod:`.bulk` reuses so that checksums and
    compressions are rosbags' own."""
    module = _module('storage_mcap')
    return module.decompress, module.deserialize_uint32, module.read_exact


def _module(name: str) -> Any:
    try:
        return importlib.import_module(f'rosbags.rosbag2.{name}')
    except ImportError:              # pragma: no cover - rosbags is a dependency
        return None


def tune_rosbags() -> None:
    """Make opening a bag with rosbags cheaper, with the same results:
    :func:`share_qos_parses` and :func:`json_first_metadata`.  Idempotent."""
    share_qos_parses()
    json_first_metadata()


def load_metadata(text: str) -> Any:
    """The document of a ``metadata.yaml`` text, as ruamel's safe loader
    (what rosbags uses) reads it.

    Text in YAML's JSON form (what :mod:`.writer` writes) is parsed by
    ``json``'s C parser, about 50 times faster than ruamel's Python one;
    JSON is YAML 1.2, so the values are the same.  Anything else goes to
    ruamel: block YAML (``ros2 bag record``'s), and the JSON the two would
    read differently — a repeated key (an error for ruamel) or ``NaN`` and
    ``Infinity`` (strings for YAML).  Raises ruamel's ``YAMLError`` for
    text that is not YAML."""
    if text.lstrip()[:1] == '{':
        try:
            return json.loads(text, object_pairs_hook=unique_keys, parse_constant=_not_yaml)
        except ValueError:
            pass
    from ruamel.yaml import YAML
    return YAML(typ='safe').load(text)


def _not_yaml(token: str) -> Any:
    raise ValueError(f'{token} is a string in YAML')


class _MetadataYAML:
    """What rosbags' reader needs of ruamel's ``YAML`` (``YAML(typ='safe')
    .load(text)``), loading through :func:`load_metadata`; made any other
    way, it is ruamel's own ``YAML``."""

    json_first = True

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs != {'typ': 'safe'}:
            from ruamel.yaml import YAML
            return YAML(*args, **kwargs)
        return super().__new__(cls)

    def load(self, stream: Any) -> Any:
        if isinstance(stream, str):
            return load_metadata(stream)
        from ruamel.yaml import YAML
        return YAML(typ='safe').load(stream)


def json_first_metadata() -> None:
    """Make rosbags' ``Reader.open`` parse ``metadata.yaml`` through
    :func:`load_metadata`: ruamel's parse of it is most of the cost of
    opening a short bag (about 1.5 ms a bag).  Does nothing where rosbags'
    reader does not load it through ruamel's ``YAML``, or where this is done."""
    module = _module('reader')
    current = getattr(module, 'YAML', None)
    if current is None or getattr(current, 'json_first', False):
        return
    module.YAML = _MetadataYAML


def share_qos_parses() -> None:
    """Make rosbags parse each distinct QoS string once per process.

    Opening a bag, rosbags parses every connection's
    ``offered_qos_profiles`` — a YAML string in MCAP channels, SQLite3
    topics and older ``metadata.yaml`` files — with a new ruamel ``YAML``
    object: about 1 ms each, for every channel of every split file of every
    bag, the largest fixed cost of opening a short bag.  The strings repeat
    across files and bags, and the parsed profiles are immutable
    (``rosbags.interfaces.Qos`` named tuples), so the parse is memoised by
    its text: the same values, each list a fresh copy.  Errors are not
    memoised (each raises as before).  Does nothing where rosbags has no
    such function, or where it is memoised already."""
    for name in ('metadata', 'reader', 'storage_mcap', 'storage_sqlite3'):
        module = _module(name)
        if module is None:
            continue
        parse = getattr(module, 'parse_qos', None)
        if parse is None or getattr(parse, 'shared', False):
            continue
        module.parse_qos = _shared(getattr(parse, 'original', parse))


@functools.lru_cache(maxsize=None)
def _shared(parse: Any) -> Any:
    """The memoised form of rosbags' ``parse_qos`` (one per original function)."""
    memo = functools.lru_cache(maxsize=1024)(lambda text: tuple(parse(text)))

    def parse_qos(dcts: Any) -> Any:
        return list(memo(dcts)) if isinstance(dcts, str) else parse(dcts)
    parse_qos.shared = True             # type: ignore[attr-defined]
    parse_qos.original = parse          # type: ignore[attr-defined]
    return parse_qos
