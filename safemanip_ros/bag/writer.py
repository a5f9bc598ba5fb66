"""Crash-safe rosbag2 writing: a bag made of short splits.

A :class:`SplitBagWriter` writes a standard rosbag2 directory (MCAP by
default, SQLite3 selectable) whose storage is split every ``split_s``
seconds, like ``ros2 bag record --max-bag-duration``.  Each split is written
by rosbags into a hidden scratch folder and, when complete, moved into the
bag and listed in ``metadata.yaml`` (rewritten atomically).  A process
killed at any moment therefore leaves a bag that ``ros2 bag`` and rosbags
read, missing at most the split that was open: ``split_s`` seconds.

Each finished split is also appended, before it is moved into the bag, to
the bag's index ``.splits.jsonl`` (one JSON line per split: its file entry
and topic counts), so a bag whose ``metadata.yaml`` misses splits (a kill
between the move and the rewrite) is repaired from it
(:mod:`safemanip_ros.bag.repair`, ``safemanip bag repair``).

A rotation costs the same whatever the length of the recording: the
per-topic totals are kept as running sums, and ``metadata.yaml`` is written
in YAML's JSON form (``json`` is C code; a pure-Python YAML dump of every
split grew to half a second at 200 splits).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rosbags.rosbag2 import StoragePlugin, Writer
from ruamel.yaml import YAML

from .errors import BagError
from .typestore import typestore

STORAGES = {'mcap': StoragePlugin.MCAP, 'sqlite3': StoragePlugin.SQLITE3}
INDEX_NAME = '.splits.jsonl'


def write_metadata(directory: Path, info: dict[str, Any], files: Iterable[dict[str, Any]] | None = None) -> None:
    """``directory/metadata.yaml`` holding ``rosbag2_bagfile_information: info``,
    replaced atomically, in YAML's JSON form (compact: json's C encoder; an
    indent selects its pure-Python one).  ``files``: the ``files`` entries,
    written one at a time (a recorder lists thousands of splits: the whole
    document built at once grew the process by megabytes each time, which
    the allocator kept)."""
    tmp = directory / 'metadata.yaml.tmp'
    with tmp.open('w') as fh:
        if files is None:
            fh.write(json.dumps({'rosbag2_bagfile_information': info}, separators=(',', ':')) + '\n')
        else:
            head = json.dumps({'rosbag2_bagfile_information': {**info, 'files': []}}, separators=(',', ':'))
            cut = head.index('"files":[]') + len('"files":[')
            fh.write(head[:cut])
            for k, entry in enumerate(files):
                fh.write((',' if k else '') + json.dumps(entry, separators=(',', ':')))
            fh.write(head[cut:] + '\n')
    tmp.replace(directory / 'metadata.yaml')


class BagWriteError(BagError):
    """A bag that cannot be written (names the path and the problem)."""


@dataclass
class _Split:
    writer: Writer
    folder: Path
    connections: dict[str, Any]
    first_ns: int


class SplitBagWriter:
    def __init__(self, path: str | Path, storage: str = 'mcap', split_s: float = 1.0,
                 custom_data: dict[str, str] | None = None) -> None:
        if storage not in STORAGES:
            raise BagWriteError(f'{path}: unknown storage {storage!r}; choose one of {sorted(STORAGES)}')
        self.path = Path(path)
        if self.path.exists():
            raise BagWriteError(f'{self.path}: already exists; choose a new bag path')
        self.storage = storage
        self.split_ns = int(split_s * 1e9)
        self.custom_data = dict(custom_data or {})
        self.topics: dict[str, str] = {}
        self._split: _Split | None = None
        self._index = 0
        # Per split: (path, start ns, duration ns, messages).  Kept as tuples: a bag of an hour at
        # 0.75 s splits lists ~5,000 files, and their parsed YAML mappings cost ~1 KB each.
        self._files: list[tuple[str, int, int, int]] = []
        self._topic_totals: dict[str, dict[str, Any]] = {}
        self._message_count = 0
        self._start_ns: int | None = None
        self._end_ns = 0
        self._scratch = self.path / '.open'
        try:
            self._scratch.mkdir(parents=True)
        except OSError as err:
            raise BagWriteError(f'{self.path}: cannot create: {err.strerror or err}') from err
        self._write_metadata()

    def add_topic(self, topic: str, msgtype: str) -> None:
        if msgtype not in typestore().fielddefs:
            raise BagWriteError(f'{self.path}: unknown message type {msgtype!r} for {topic}')
        self.topics[topic] = msgtype

    def write(self, topic: str, timestamp_ns: int, cdr: bytes) -> None:
        """One serialized (CDR) message; rotates the split when it is old enough."""
        if topic not in self.topics:
            raise BagWriteError(f'{self.path}: topic {topic} was not added (add_topic first)')
        if self._split is not None and timestamp_ns - self._split.first_ns >= self.split_ns:
            self._close_split()
        if self._split is None:
            self._open_split(timestamp_ns)
        split = self._split
        assert split is not None
        conn = split.connections.get(topic)
        if conn is None:
            conn = split.connections[topic] = split.writer.add_connection(topic, self.topics[topic],
                                                                          typestore=typestore())
        split.writer.write(conn, timestamp_ns, cdr)

    def rotate_if_due(self, now_ns: int) -> None:
        """Close the open split if it began ``split_s`` or more before ``now_ns``
        (call periodically, so a quiet topic does not keep a split open)."""
        if self._split is not None and now_ns - self._split.first_ns >= self.split_ns:
            self._close_split()

    def flush(self) -> None:
        """Close the open split now (call at least every ``split_s`` when idle)."""
        if self._split is not None:
            self._close_split()

    def close(self) -> None:
        self.flush()
        self._write_metadata()
        shutil.rmtree(self._scratch, ignore_errors=True)

    # ------------------------------------------------------------- internals
    def _open_split(self, first_ns: int) -> None:
        folder = self._scratch / f'split_{self._index}'
        writer = Writer(folder, version=9, storage_plugin=STORAGES[self.storage])
        writer.open()
        self._split = _Split(writer, folder, {}, first_ns)

    def _close_split(self) -> None:
        split, self._split = self._split, None
        assert split is not None
        split.writer.close()
        meta = YAML(typ='safe').load((split.folder / 'metadata.yaml').read_text())['rosbag2_bagfile_information']
        src = split.folder / meta['relative_file_paths'][0]
        name = f'{self.path.name}_{self._index}{src.suffix}'
        meta['files'][0]['path'] = name
        # Index first, then move: a kill in between leaves an index line for a
        # file that is not in the bag (ignored by repair), never the reverse.
        with open(self.path / INDEX_NAME, 'a') as index:
            index.write(json.dumps({'file': meta['files'][0], 'message_count': meta['message_count'],
                                    'topics_with_message_count': meta['topics_with_message_count']},
                                   separators=(',', ':')) + '\n')
        src.replace(self.path / name)
        shutil.rmtree(split.folder, ignore_errors=True)
        self._index += 1
        meta['files'][0]['path'] = name
        entry = meta['files'][0]
        self._files.append((str(name), int(entry['starting_time']['nanoseconds_since_epoch']),
                            int(entry['duration']['nanoseconds']), int(entry['message_count'])))
        start = meta['starting_time']['nanoseconds_since_epoch']
        self._start_ns = start if self._start_ns is None else min(self._start_ns, start)
        self._end_ns = max(self._end_ns, start + meta['duration']['nanoseconds'])
        self._message_count += meta['message_count']
        for entry in meta['topics_with_message_count']:
            total = self._topic_totals.get(entry['topic_metadata']['name'])
            if total is None:
                self._topic_totals[entry['topic_metadata']['name']] = {
                    'topic_metadata': dict(entry['topic_metadata']), 'message_count': entry['message_count']}
            else:
                total['message_count'] += entry['message_count']
        # metadata.yaml lists every split, so rewriting it costs O(splits): done when the split count
        # reaches a power of two (amortised O(1) per rotation; at most half the splits unlisted while
        # recording) and at close.  The index line above is the O(1) record a kill leaves behind:
        # readers repair from it (bag.repair).
        if self._index & (self._index - 1) == 0:
            self._write_metadata()

    def _write_metadata(self) -> None:
        start = self._start_ns or 0
        info = {
            'version': 9,
            'storage_identifier': self.storage,
            'relative_file_paths': [f[0] for f in self._files],
            'duration': {'nanoseconds': max(0, self._end_ns - start)},
            'starting_time': {'nanoseconds_since_epoch': start},
            'message_count': self._message_count,
            'topics_with_message_count': list(self._topic_totals.values()),
            'compression_format': '',
            'compression_mode': '',
            'files': [],
            'custom_data': self.custom_data or None,
            'ros_distro': 'rosbags',
        }
        write_metadata(self.path, info, ({'path': path, 'starting_time': {'nanoseconds_since_epoch': start_ns},
                                          'duration': {'nanoseconds': duration_ns}, 'message_count': count}
                                         for path, start_ns, duration_ns, count in self._files))
