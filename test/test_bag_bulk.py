"""The bulk bag reader yields exactly what rosbags' ``Reader.messages`` yields:
the same connections, bag times and bytes, in the same order, for both
storage formats, compressed chunks and not, per-message compression, split
bags, chunks that overlap in time and ties in log time."""

from __future__ import annotations

import numpy as np
import pytest
from rosbags.rosbag2 import Reader, ReaderError, Writer
from rosbags.rosbag2.enums import CompressionFormat, CompressionMode, StoragePlugin

from safemanip_ros.bag.bulk import read_all, read_batches
from safemanip_ros.bag.typestore import typestore
from safemanip_ros.bag.writer import SplitBagWriter

TOPICS = {'/a': 'std_msgs/msg/String', '/b': 'sensor_msgs/msg/JointState', '/c': 'tf2_msgs/msg/TFMessage'}


def _records(rng: np.random.Generator, n: int) -> list[tuple[str, int, bytes]]:
    """Out-of-order log times with many ties (chunks then overlap in time),
    payloads large enough for several 1 MiB chunks."""
    out = []
    for k in range(n):
        t = int(rng.integers(0, 400)) * 1_000_000 + (k // 300) * 50_000_000
        size = int(rng.integers(1, 9000))
        out.append((list(TOPICS)[int(rng.integers(0, 3))], t, rng.bytes(size)))
    return out


def _write(path, storage: str, mode: CompressionMode | None, records) -> None:
    plugin = StoragePlugin.MCAP if storage == 'mcap' else StoragePlugin.SQLITE3
    w = Writer(path, version=9, storage_plugin=plugin)
    if mode is not None:
        w.set_compression(mode, CompressionFormat.ZSTD)
    w.open()
    conns = {t: w.add_connection(t, m, typestore=typestore()) for t, m in TOPICS.items()}
    for topic, t, data in records:
        w.write(conns[topic], t, data)
    w.close()


def _rosbags(path, topics):
    with Reader(path) as r:
        conns = [c for c in r.connections if c.topic in topics]
        return [(c.topic, t, bytes(d)) for c, t, d in r.messages(connections=conns)]


def _ours(path, topics):
    with Reader(path) as r:
        conns = [c for c in r.connections if c.topic in topics]
        batches = list(read_batches(r, conns))
        every = read_all(r, conns)
    flat = [(c.topic, t, bytes(d)) for b in batches for c, t, d in zip(b.connections, b.time_ns.tolist(), b.raws)]
    assert flat == [(c.topic, t, bytes(d)) for c, t, d in zip(every.connections, every.time_ns.tolist(), every.raws)]
    return flat, len(batches)


@pytest.mark.parametrize('storage,mode', [('mcap', None), ('mcap', CompressionMode.STORAGE),
                                          ('mcap', CompressionMode.MESSAGE), ('sqlite3', None)])
def test_same_messages_as_rosbags(tmp_path, storage, mode):
    rng = np.random.default_rng(3)
    records = _records(rng, 2500)
    _write(tmp_path / 'bag', storage, mode, records)
    for topics in ({'/a', '/b', '/c'}, {'/b'}, {'/a', '/c'}):
        ours, batches = _ours(tmp_path / 'bag', topics)
        assert ours == _rosbags(tmp_path / 'bag', topics)
        assert len(ours) == sum(1 for r in records if r[0] in topics)
    # No connection asked for reads nothing (rosbags' Reader.messages reads them all): a bag without the
    # topic a reader looks for must not hand it every other message.
    with Reader(tmp_path / 'bag') as r:
        assert list(read_batches(r, [])) == [] and len(read_all(r, [])) == 0
    if storage == 'mcap' and mode != CompressionMode.MESSAGE:
        with Reader(tmp_path / 'bag') as r:
            chunks = sorted(r.storage.storages[0].chunks, key=lambda c: c.chunk_start_offset)
            overlap = any(b.message_start_time <= a.message_end_time for a, b in zip(chunks, chunks[1:]))
        assert len(chunks) >= 8 and overlap
        assert batches >= 2       # emitted chunk by chunk, not held to the end


def test_split_bags_of_our_recorder(tmp_path):
    rng = np.random.default_rng(4)
    w = SplitBagWriter(tmp_path / 'bag', 'mcap', split_s=2.0)
    for topic, msgtype in TOPICS.items():
        w.add_topic(topic, msgtype)
    for k in range(900):
        w.write(list(TOPICS)[k % 3], k * 10_000_000 + (k % 3), rng.bytes(int(rng.integers(1, 300))))
    w.close()
    ours, batches = _ours(tmp_path / 'bag', set(TOPICS))
    assert ours == _rosbags(tmp_path / 'bag', set(TOPICS))
    assert len(ours) == 900 and batches >= 5


def test_corrupt_chunk_is_a_reader_error(tmp_path):
    rng = np.random.default_rng(5)
    _write(tmp_path / 'bag', 'mcap', CompressionMode.STORAGE, _records(rng, 600))
    f = next((tmp_path / 'bag').glob('*.mcap'))
    data = bytearray(f.read_bytes())
    data[200:260] = bytes(60)      # inside the first chunk's compressed bytes
    f.write_bytes(bytes(data))
    with Reader(tmp_path / 'bag') as r, pytest.raises(ReaderError):
        read_all(r, r.connections)


def _message_index_entries(bag):
    """(file, file offsets of each message index record of the first split)."""
    f = next(bag.glob('*.mcap'))
    with Reader(bag) as r:
        records = [rec for chunk in r.storage.storages[0].chunks for rec in chunk.message_index_offsets.values()]
    return f, records


@pytest.mark.parametrize('damage', ['drop', 'wrong'])
def test_a_message_index_that_misses_a_message_is_not_trusted(tmp_path, monkeypatch, damage):
    """Messages are found through each chunk's message index when it
    accounts for every message record; an index entry pointing at the
    wrong record, or one record left unindexed, makes the chunk walked:
    the same messages as rosbags either way."""
    import safemanip_ros.bag.bulk as bulk

    rng = np.random.default_rng(6)
    _write(tmp_path / 'bag', 'mcap', CompressionMode.STORAGE, _records(rng, 900))
    taken = []
    real = bulk._indexed_messages
    monkeypatch.setattr(bulk, '_indexed_messages', lambda *a: taken.append(real(*a)) or taken[-1])
    ours, _ = _ours(tmp_path / 'bag', set(TOPICS))
    assert ours == _rosbags(tmp_path / 'bag', set(TOPICS))
    assert taken and all(t is not None for t in taken)          # an intact index is used
    f, records = _message_index_entries(tmp_path / 'bag')
    data = bytearray(f.read_bytes())
    rec = records[0]          # op, record length, channel id, entries' byte length, (log time, offset) entries
    size = int.from_bytes(data[rec + 11:rec + 15], 'little')
    assert size >= 32
    if damage == 'drop':      # one entry fewer: that channel's last record of the chunk is unlisted
        data[rec + 11:rec + 15] = (size - 16).to_bytes(4, 'little')
    else:                     # the first entry pointing into the middle of a record
        at = rec + 15 + 8
        data[at:at + 8] = (int.from_bytes(data[at:at + 8], 'little') + 3).to_bytes(8, 'little')
    f.write_bytes(bytes(data))
    taken.clear()
    ours, _ = _ours(tmp_path / 'bag', set(TOPICS))
    assert ours == _rosbags(tmp_path / 'bag', set(TOPICS))
    assert None in taken
