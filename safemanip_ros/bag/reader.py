"""Opening a recorded bag: the one way every reader of this project does it.

:func:`open_bag` opens a rosbag2 folder with rosbags, after
:func:`~.compat.tune_rosbags`, and reads it as it should have been written:

* a split bag whose ``metadata.yaml`` misses splits that its index lists (a
  recorder killed between moving a split in and rewriting the metadata) is
  read through the repaired metadata (:mod:`.repair`), without touching the
  bag;
* a bag of several split files of which some cannot be opened (a truncated
  last split after a crash) is read from the splits that can, each left-out
  split named in :attr:`OpenBag.warnings`.

Both go through a scratch folder of links and a filtered ``metadata.yaml``,
made and removed inside the context.  A bag that cannot be read at all
raises :class:`~.errors.BagReadError` naming the bag and rosbags' reason.
"""

from __future__ import annotations

import shutil
import struct
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .bulk import RecordBatch, messages, read_all, read_batches
from .compat import load_metadata, tune_rosbags
from .errors import BagMessageError, BagReadError
from .metadata import BagMetadataError, check_info, split_file_name
from .typestore import typestore

# What malformed CDR bytes make rosbags' deserializer raise (besides its own
# SerdeError): reading past the end, bad lengths, bad UTF-8.
_BAD_BYTES = (struct.error, IndexError, ValueError, UnicodeDecodeError, OverflowError, MemoryError)


def is_bag(path: Path) -> bool:
    """A folder with a ``metadata.yaml``."""
    return path.is_dir() and (path / 'metadata.yaml').is_file()


@dataclass
class OpenBag:
    """An open bag: rosbags' ``Reader`` and what opening it had to work around."""

    path: Path
    reader: Any
    warnings: list[str] = field(default_factory=list)

    @property
    def connections(self) -> list[Any]:
        return list(self.reader.connections)

    def batches(self, connections: Sequence[Any]) -> Iterator[RecordBatch]:
        """The messages of ``connections`` in rosbags' order, in bulk
        (:func:`~.bulk.read_batches`); a truncated or corrupt file raises
        :class:`BagReadError` naming the bag."""
        with self._named():
            yield from read_batches(self.reader, connections)

    def messages(self, connections: Sequence[Any]) -> Iterator[tuple[Any, int, bytes]]:
        """``(connection, bag time ns, bytes)`` per message, as ``Reader.messages``."""
        with self._named():
            yield from messages(self.reader, connections)

    def read_all(self, connections: Sequence[Any]) -> RecordBatch:
        """Every message of ``connections`` as one batch."""
        with self._named():
            return read_all(self.reader, connections)

    def decode(self, raw: bytes, connection: Any, bag_time_ns: int) -> Any:
        """The message ``raw`` of ``connection``; bytes that do not
        deserialize raise :class:`BagMessageError` naming the bag, topic and time."""
        from rosbags.serde import SerdeError
        try:
            return typestore().deserialize_cdr(raw, connection.msgtype)
        except (SerdeError, *_BAD_BYTES) as err:
            raise BagMessageError(f'{self.path}: corrupt message on {connection.topic} at bag time '
                                  f'{bag_time_ns * 1e-9:.3f} s: {type(err).__name__}: {err}') from err

    @contextmanager
    def _named(self) -> Iterator[None]:
        """rosbags' reading errors as :class:`BagReadError` naming this bag."""
        from rosbags.rosbag2 import ReaderError
        try:
            yield
        except ReaderError as err:
            raise BagReadError(f'{self.path}: corrupt or truncated bag: {err}') from err


@contextmanager
def open_bag(path: str | Path) -> Iterator[OpenBag]:
    """The bag at ``path``, open for the duration of the context (module
    docstring: repair and unreadable splits)."""
    path = Path(path)
    reader, warnings, scratch = _open(path)
    try:
        yield OpenBag(path, reader, warnings)
    finally:
        reader.close()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _open(path: Path) -> tuple[Any, list[str], Path | None]:
    """``(reader, warnings, scratch folder or None)``."""
    from rosbags.rosbag2 import Reader, ReaderError
    from ruamel.yaml import YAMLError  # type: ignore[attr-defined]

    from .repair import BagRepairError, repaired_metadata

    tune_rosbags()
    warnings: list[str] = []
    try:
        # Checks every field read from the bag's files first: a malformed metadata.yaml, or one that
        # names a split outside the bag, raises BagMetadataError here, before rosbags sees it.
        info, repair = repaired_metadata(path)
    except BagRepairError:
        repair = None
    if repair is not None:
        warnings += repair.lines() if repair.changed else repair.problems()
        if repair.changed:     # read through the repaired metadata; the bag itself is not touched
            view = _split_view(path, info, list(info['relative_file_paths']))
            try:
                reader = Reader(view)
                reader.open()
                return reader, warnings, view
            except ReaderError:
                shutil.rmtree(view, ignore_errors=True)
    try:
        reader = Reader(path)
        reader.open()
        return reader, warnings, None
    except ReaderError as err:
        first_error = err
    except OSError as err:       # no such folder, no metadata.yaml, no permission
        raise BagReadError(f'{path}: cannot open bag: {err.strerror or err}') from err
    try:
        doc = load_metadata((path / 'metadata.yaml').read_text())
        info = check_info(path, doc['rosbag2_bagfile_information'])
        files = list(info['relative_file_paths'])
    except (OSError, UnicodeDecodeError, YAMLError, KeyError, TypeError) as err:
        raise BagReadError(f'{path}: cannot open bag: {first_error}') from err
    if len(files) < 2:
        raise BagReadError(f'{path}: cannot open bag: {first_error}')
    good, bad = [], []
    for name in files:
        view = _split_view(path, info, [name])
        try:
            r = Reader(view)
            r.open()
            r.close()
            good.append(name)
        except ReaderError as err:
            bad.append(f'{name} ({err})')
        finally:
            shutil.rmtree(view, ignore_errors=True)
    if not good:
        raise BagReadError(f'{path}: cannot open bag: no split file can be read: {"; ".join(bad)}')
    scratch = _split_view(path, info, good)
    reader = Reader(scratch)
    reader.open()
    return reader, warnings + [f'{path}: left out unreadable split {b}' for b in bad], scratch


def _split_view(path: Path, info: dict[str, Any], names: list[str]) -> Path:
    """A scratch bag folder holding links to ``names`` and a metadata.yaml
    that lists only them."""
    from .writer import write_metadata
    for name in names:       # file names checked on entry (.metadata.check_info): each link stays in the view
        if split_file_name(name) != name:
            raise BagMetadataError(f'{path / "metadata.yaml"}: {name!r} is not a file name inside the bag')
    view = Path(tempfile.mkdtemp(prefix='safemanip-split-'))
    for name in names:
        (view / name).symlink_to((path / name).resolve())
    sub = dict(info)
    sub['relative_file_paths'] = list(names)
    sub['files'] = [f for f in info.get('files') or [] if f.get('path') in names]
    write_metadata(view, sub)
    return view
