"""``safemanip_ros/PredicateArray`` messages from CDR bytes to numpy columns,
a whole bag at a time.

A publisher repeats its layout — the same predicate names, in the same
order, with the same source strings — so all its messages have the same
length and the same bytes everywhere except the stamps, the sequence
number and the value/unknown flags.  The first message of a layout is
parsed field by field (:func:`parse_predicate_array`), which gives the
offsets of those variable bytes; every message of the same length whose
other bytes equal that template is then decoded by indexing one
``uint8[messages, length]`` array.  A message that matches no template is
parsed on its own (and becomes a template).  Values are those of rosbags'
deserializer, bit for bit (``test/test_audit_columns.py``).

CDR here is what rosbag2 stores: a 4-byte encapsulation header (little-
endian CDR, ``00 01 00 00``), then the fields aligned to their size
relative to the end of that header.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from ..errors import SafemanipError

CDR_LE = b'\x00\x01'


class ColumnDecodeError(SafemanipError):
    """A message is not a well-formed little-endian CDR PredicateArray."""


@dataclass
class PredicateLayout:
    """Byte offsets (from the start of the message, header included) of one
    layout's variable fields, and the template its other bytes must match."""

    length: int
    names: tuple[str, ...]
    sources: tuple[str, ...]
    value_at: np.ndarray            # intp[P]
    unknown_at: np.ndarray          # intp[P]
    stamp_at: int                   # header.stamp.sec (int32) then nanosec (uint32)
    seq_at: int                     # uint64
    data_stamp_at: np.ndarray       # intp[P]: data_stamp.sec, nanosec follows
    template: np.ndarray = field(repr=False)   # uint8[length]
    fixed: np.ndarray = field(repr=False)      # intp: offsets that must equal the template

    mask: np.ndarray = field(init=False, repr=False)     # uint8[length]: 0xFF on fixed bytes, 0 elsewhere
    template_match: 'RowTemplate' = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.mask = np.zeros(self.length, np.uint8)
        self.mask[self.fixed] = 0xFF
        self.template_match = RowTemplate(self.template, self.mask)

    def matches(self, rows: np.ndarray) -> np.ndarray:
        """``bool[n]``: which rows (``uint8[n, length]``) have this layout,
        i.e. equal the template on every fixed byte."""
        return self.template_match.matches(rows)


class RowTemplate:
    """Which rows of a ``uint8[n, length]`` array equal a template on the
    bytes a mask keeps.  Masking and comparing whole rows streams through
    memory (gathering the kept bytes by index was 5x slower); doing it on
    the rows viewed as ``uint64`` words (the last ``length % 8`` bytes as
    bytes) is another 7-9x faster than byte by byte."""

    def __init__(self, template: np.ndarray, mask: np.ndarray) -> None:
        self.length = len(template)
        self.words = self.length // 8 * 8
        masked = template & mask
        self.mask64 = np.ascontiguousarray(mask[:self.words]).view('<u8')
        self.template64 = np.ascontiguousarray(masked[:self.words]).view('<u8')
        self.mask_tail, self.template_tail = mask[self.words:], masked[self.words:]

    def matches(self, rows: np.ndarray) -> np.ndarray:
        head = np.ascontiguousarray(rows[:, :self.words]) if rows.strides[1] != 1 else rows[:, :self.words]
        ok = (np.bitwise_and(head.view('<u8'), self.mask64) == self.template64).all(axis=1)
        if self.words < self.length:
            ok &= (np.bitwise_and(rows[:, self.words:], self.mask_tail) == self.template_tail).all(axis=1)
        return ok


def _string(buf: bytes, pos: int, where: str) -> tuple[str, int]:
    pos = (pos + 3) & ~3
    if pos + 4 > len(buf):
        raise ColumnDecodeError(f'{where}: truncated at byte {pos}')
    (n,) = struct.unpack_from('<I', buf, pos)
    end = pos + 4 + n
    if n == 0 or end > len(buf) or buf[end - 1] != 0:
        raise ColumnDecodeError(f'{where}: bad string of length {n} at byte {pos}')
    return buf[pos + 4:end - 1].decode('utf-8'), end


def parse_predicate_array(raw: bytes, where: str = 'message') -> PredicateLayout:
    """The layout of one message, by walking its fields."""
    if raw[:2] != CDR_LE:
        raise ColumnDecodeError(f'{where}: not little-endian CDR (encapsulation {raw[:2].hex()})')
    body = raw[4:]
    if len(body) < 12:
        raise ColumnDecodeError(f'{where}: truncated ({len(raw)} bytes)')
    variable: list[tuple[int, int]] = [(0, 8)]
    _, pos = _string(body, 8, where)                       # header.frame_id
    pos = (pos + 7) & ~7
    seq_at = pos
    variable.append((pos, 8))
    pos += 8
    if pos + 4 > len(body):
        raise ColumnDecodeError(f'{where}: truncated before the predicate count')
    (count,) = struct.unpack_from('<I', body, pos)
    pos += 4
    names, sources, value_at, unknown_at, data_at = [], [], [], [], []
    for k in range(count):
        name, pos = _string(body, pos, f'{where}: predicates[{k}].name')
        if pos + 2 > len(body):
            raise ColumnDecodeError(f'{where}: predicates[{k}]: truncated')
        value_at.append(pos)
        unknown_at.append(pos + 1)
        variable.append((pos, 2))
        source, pos = _string(body, pos + 2, f'{where}: predicates[{k}].source')
        pos = (pos + 3) & ~3
        data_at.append(pos)
        variable.append((pos, 8))
        pos += 8
        if pos > len(body):
            raise ColumnDecodeError(f'{where}: predicates[{k}]: truncated data_stamp')
        names.append(name)
        sources.append(source)
    if pos != len(body):
        raise ColumnDecodeError(f'{where}: {len(body) - pos} trailing bytes')
    fixed = np.ones(len(raw), bool)
    for start, n in variable:
        fixed[4 + start:4 + start + n] = False
    return PredicateLayout(len(raw), tuple(names), tuple(sources), np.array(value_at, np.intp) + 4,
                           np.array(unknown_at, np.intp) + 4, 4, seq_at + 4, np.array(data_at, np.intp) + 4,
                           np.frombuffer(raw, np.uint8).copy(), np.flatnonzero(fixed))


@dataclass
class PredicateColumns:
    """The messages of one layout: their positions in the input, bag times,
    header stamps (ns), and values/unknown flags per predicate."""

    layout: PredicateLayout
    rows: np.ndarray          # intp[n]: index into the decoded message list
    stamp_ns: np.ndarray      # int64[n]: header stamps
    values: np.ndarray        # bool[n, P]
    unknown: np.ndarray       # bool[n, P]


def _int32_at(arr: np.ndarray, at: int, rows: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(arr[rows, at:at + 4]).view('<i4')[:, 0].astype(np.int64)


def _uint32_at(arr: np.ndarray, at: int, rows: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(arr[rows, at:at + 4]).view('<u4')[:, 0].astype(np.int64)


def decode_predicate_arrays(raws: list[bytes], where: str = 'bag') -> list[PredicateColumns]:
    """Decode every message; one :class:`PredicateColumns` per layout met."""
    layouts: list[PredicateLayout] = []
    by_length: dict[int, list[int]] = {}
    for i, raw in enumerate(raws):
        by_length.setdefault(len(raw), []).append(i)
    # layout index → pieces of (rows, header stamps, values, unknown): only the
    # columns are gathered from the bytes, never whole messages again.
    groups: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]] = {}
    for length, rows_list in by_length.items():
        rows = np.array(rows_list, np.intp)
        arr = np.frombuffer(b''.join(raws[i] for i in rows_list), np.uint8).reshape(len(rows_list), length)
        pending = np.ones(len(rows), bool)
        while pending.any():
            candidates = [k for k, lay in enumerate(layouts) if lay.length == length]
            matched = False
            for k in candidates:
                lay = layouts[k]
                sub = np.flatnonzero(pending)
                ok = lay.matches(arr if len(sub) == len(arr) else arr[sub])
                if ok.any():
                    hit = sub[ok]
                    stamp = _int32_at(arr, lay.stamp_at, hit) * 1_000_000_000 + _uint32_at(arr, lay.stamp_at + 4, hit)
                    groups.setdefault(k, []).append((rows[hit], stamp, arr[np.ix_(hit, lay.value_at)] != 0,
                                                     arr[np.ix_(hit, lay.unknown_at)] != 0))
                    pending[hit] = False
                    matched = True
            if pending.any() and not matched:
                first = int(np.flatnonzero(pending)[0])
                layouts.append(parse_predicate_array(raws[int(rows[first])], f'{where}: message {int(rows[first])}'))
    out = []
    for k, pieces in sorted(groups.items()):
        rows, stamp, values, unknown = (np.concatenate(col) for col in zip(*pieces))
        order = np.argsort(rows, kind='stable')
        out.append(PredicateColumns(layouts[k], rows[order], stamp[order], values[order], unknown[order]))
    return out
