"""CDR messages of any type to numpy columns, many messages at a time.

For every message type the typestore defines (:mod:`.columns` uses it for
``PredicateArray``, :mod:`safemanip_ros.grounding.rawinputs` for the raw inputs): a publisher
repeats its *layout* — the same strings (joint names, frame ids, body names)
and the same sequence lengths — so its messages have the same length and the
same bytes everywhere except the numbers and the padding.  The first message
of a layout is walked field by field from the type's definition
(:func:`parse_layout`), which names every number and its byte offset; every
message of the same length that equals that template outside its numbers
and padding is then decoded by indexing one ``uint8[messages, length]``
array.  Numbers are those of rosbags' deserializer bit for bit: the same
bytes read as the same little-endian type (``test/test_bag_layouts.py``).

A message the walk cannot take — big-endian CDR, a type with more than
``MAX_NUMBERS`` numbers (an image), bytes that do not parse — raises
:class:`LayoutError`; callers then deserialize it with rosbags.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import BagError

MAX_NUMBERS = 4096
"""Numbers per message beyond which a layout is not worth building (images
and point clouds go through rosbags)."""

MAX_LAYOUTS = 256
"""Layouts one decoder keeps.  A type whose strings change from message to
message (a counter in a frame id) would make every message a layout and
matching quadratic; past this many, its messages go through rosbags."""

_DTYPES = {'bool': '|u1', 'byte': '|u1', 'char': '|u1', 'uint8': '|u1', 'int8': '|i1', 'uint16': '<u2',
           'int16': '<i2', 'uint32': '<u4', 'int32': '<i4', 'uint64': '<u8', 'int64': '<i8',
           'float32': '<f4', 'float64': '<f8'}


class LayoutError(BagError):
    """A message this decoder does not take (it then goes through rosbags)."""


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
        return np.asarray(ok)


@dataclass
class Layout:
    """One message layout: every number's path (``transforms[2].transform.
    translation.x``), byte offset (from the start of the message, the
    4-byte encapsulation header included) and dtype; every string's value;
    and the template the other bytes (all but numbers and padding) must match."""

    msgtype: str
    length: int
    numbers: dict[str, tuple[int, str]]
    strings: dict[str, str]
    sequence_lengths: dict[str, int]
    template: np.ndarray = field(repr=False)      # uint8[length]
    padding: list[int] = field(repr=False)         # offsets of alignment and final padding bytes
    template_match: RowTemplate = field(init=False, repr=False)
    gather_plans: dict[object, tuple[list[tuple[str, int | None, np.ndarray]], dict[str, tuple[str, int]]]] = field(
        init=False, repr=False, compare=False, default_factory=dict)   # keep → plan (see _gather)

    def __post_init__(self) -> None:
        # A layout fixes its strings and sequence lengths.  Numbers vary, and so may alignment and final
        # padding bytes (serializers need not zero them; rosbags ignores them).
        mask = np.full(self.length, 0xFF, np.uint8)
        for offset, dtype in self.numbers.values():
            mask[offset:offset + int(dtype[-1])] = 0
        mask[self.padding] = 0
        self.template_match = RowTemplate(self.template, mask)

    def matches(self, rows: np.ndarray) -> np.ndarray:
        """``bool[n]``: the rows (``uint8[n, length]``) of this layout."""
        return self.template_match.matches(rows)


class _Walker:
    def __init__(self, typestore: Any, raw: bytes, where: str) -> None:
        self.ts = typestore
        self.buf = raw
        self.where = where
        self.pos = 4
        self.padding: list[int] = []     # offsets of alignment bytes (their content is not data)
        self.numbers: dict[str, tuple[int, str]] = {}
        self.strings: dict[str, str] = {}
        self.sequences: dict[str, int] = {}

    def _align(self, size: int) -> None:
        aligned = 4 + ((self.pos - 4 + size - 1) & -size)
        self.padding += range(self.pos, min(aligned, len(self.buf)))
        self.pos = aligned

    def _need(self, n: int, what: str) -> None:
        if self.pos + n > len(self.buf):
            raise LayoutError(f'{self.where}: truncated at byte {self.pos} reading {what}')

    def _count(self, what: str) -> int:
        self._align(4)
        self._need(4, what)
        (n,) = struct.unpack_from('<I', self.buf, self.pos)
        self.pos += 4
        return int(n)

    def message(self, msgtype: str, path: str) -> None:
        try:
            _, fields = self.ts.fielddefs[msgtype]
        except KeyError:
            raise LayoutError(f'{self.where}: unknown type {msgtype}') from None
        for name, desc in fields:
            self.node(desc, f'{path}{name}')

    def node(self, desc: Any, path: str) -> None:
        kind = desc[0].name
        if kind == 'BASE':
            self.base(desc[1][0], path)
        elif kind == 'NAME':
            self.message(desc[1], f'{path}.')
        elif kind in ('ARRAY', 'SEQUENCE'):
            sub, size = desc[1]
            n = size if kind == 'ARRAY' else self._count(path)
            if kind == 'SEQUENCE':
                self.sequences[path] = n
            if len(self.numbers) + n > MAX_NUMBERS:
                raise LayoutError(f'{self.where}: {path} has {n} elements (more than {MAX_NUMBERS})')
            for k in range(n):
                self.node(sub, f'{path}[{k}]')
        else:
            raise LayoutError(f'{self.where}: {path}: unsupported field kind {kind}')

    def base(self, typename: str, path: str) -> None:
        if typename == 'string':
            n = self._count(path)
            self._need(n, path)
            if n == 0 or self.buf[self.pos + n - 1] != 0:
                raise LayoutError(f'{self.where}: {path}: bad string of length {n} at byte {self.pos - 4}')
            try:
                self.strings[path] = self.buf[self.pos:self.pos + n - 1].decode('utf-8')
            except UnicodeDecodeError as err:
                raise LayoutError(f'{self.where}: {path}: {err}') from None
            self.pos += n
            return
        dtype = _DTYPES.get(typename)
        if dtype is None:
            raise LayoutError(f'{self.where}: {path}: unsupported type {typename}')
        size = int(dtype[-1])
        self._align(size)
        self._need(size, path)
        if len(self.numbers) >= MAX_NUMBERS:
            raise LayoutError(f'{self.where}: more than {MAX_NUMBERS} numbers')
        self.numbers[path] = (self.pos, dtype)
        self.pos += size


def parse_layout(typestore: Any, msgtype: str, raw: bytes, where: str = 'message') -> Layout:
    """The layout of one message of ``msgtype``, by walking its fields."""
    if raw[:2] != b'\x00\x01':
        raise LayoutError(f'{where}: not little-endian CDR (encapsulation {raw[:2].hex()})')
    w = _Walker(typestore, raw, where)
    w.message(msgtype, '')
    if len(raw) - w.pos > 3:       # (up to 3 bytes of padding to a multiple of 4 are allowed)
        raise LayoutError(f'{where}: {len(raw) - w.pos} trailing bytes')
    return Layout(msgtype, len(raw), w.numbers, w.strings, w.sequences, np.frombuffer(raw, np.uint8).copy(),
                  w.padding + list(range(w.pos, len(raw))))


class Numbers(Mapping[str, np.ndarray]):
    """A layout's number columns for some rows: path → ``[n]`` array, each a
    column of the block of numbers of its dtype."""

    __slots__ = ('blocks', 'where')

    def __init__(self, blocks: dict[str, np.ndarray], where: dict[str, tuple[str, int]]) -> None:
        self.blocks = blocks            # dtype → [n, numbers of that dtype]
        self.where = where              # path → (dtype, column in its block)

    def __getitem__(self, path: str) -> np.ndarray:
        dtype, col = self.where[path]
        return self.blocks[dtype][:, col]

    def __iter__(self) -> Iterator[str]:
        return iter(self.where)

    def __len__(self) -> int:
        return len(self.where)


@dataclass
class Columns:
    """Messages of one layout: their positions in the decoded list and one
    array per number path."""

    layout: Layout
    rows: np.ndarray                    # intp[n]
    numbers: Numbers                    # path → [n]

    def stack(self, paths: list[str], dtype: Any = None) -> np.ndarray:
        """The columns ``paths`` side by side (``[n, len(paths)]``)."""
        if not paths:
            return np.zeros((len(self.rows), 0), dtype or float)
        where = self.numbers.where
        places = [where[p] for p in paths]
        kinds = {d for d, _ in places}
        if len(kinds) == 1:             # one gather from one block (the usual case)
            return self.numbers.blocks[places[0][0]][:, [c for _, c in places]]
        return np.stack([self.numbers[p] for p in paths], axis=1)


class LayoutDecoder:
    """Decodes messages of one type, remembering its layouts across calls
    (a bag is decoded batch by batch).  ``keep``: which number paths to
    gather (default all)."""

    def __init__(self, typestore: Any, msgtype: str, keep: Callable[[str], bool] | None = None) -> None:
        self.typestore = typestore
        self.msgtype = msgtype
        self.keep = keep
        self.layouts: list[Layout] = []
        self._by_length: dict[int, list[int]] = {}     # message length → indices of its layouts

    def decode(self, raws: list[bytes], where: str = 'bag') -> tuple[list[Columns], np.ndarray]:
        """Columns per layout met, and the indices of the messages that no
        layout takes (to be deserialized by rosbags)."""
        lengths = np.fromiter(map(len, raws), np.intp, len(raws))
        by_length = np.argsort(lengths, kind='stable')      # each length's messages in order
        bounds = np.flatnonzero(np.diff(lengths[by_length])) + 1
        out: list[Columns] = []
        rejected: list[int] = []
        for rows in np.split(by_length, bounds) if len(raws) else []:
            length = int(lengths[rows[0]])
            arr = np.frombuffer(b''.join([raws[i] for i in rows.tolist()]), np.uint8).reshape(len(rows), length)
            # The layouts of this length, the latest to take a message first: a publisher repeats
            # its layout, so the first tried usually takes them all.  (A message that two layouts
            # take walks the same way under both: its values do not depend on which.)
            candidates = self._by_length.setdefault(length, [])
            if candidates:          # the usual case first, without the masks the search below builds
                lay = self.layouts[candidates[0]]
                if lay.matches(arr).all():
                    out.append(Columns(lay, rows, _gather(arr, None, lay, self.keep)))
                    continue
            pending = np.ones(len(rows), bool)
            left = len(rows)
            tried: set[int] = set()
            while left:
                progressed = False
                for k in list(candidates):
                    if k in tried:
                        continue
                    lay = self.layouts[k]
                    sub = np.flatnonzero(pending)
                    ok = lay.matches(arr if len(sub) == len(arr) else arr[sub])
                    tried.add(k)
                    if ok.any():
                        hit = sub[ok]
                        out.append(Columns(lay, rows[hit], _gather(arr, hit, lay, self.keep)))
                        pending[hit] = False
                        left -= len(hit)
                        progressed = True
                        candidates.remove(k)
                        candidates.insert(0, k)
                        if not left:
                            break
                if left and not progressed:
                    if len(self.layouts) >= MAX_LAYOUTS:
                        rejected += rows[pending].tolist()
                        break
                    first = int(np.flatnonzero(pending)[0])
                    try:
                        self.layouts.append(parse_layout(self.typestore, self.msgtype, raws[int(rows[first])],
                                                         f'{where}: message {int(rows[first])}'))
                        candidates.append(len(self.layouts) - 1)
                    except LayoutError:
                        rejected.append(int(rows[first]))
                        pending[first] = False
                        left -= 1
        return out, np.array(sorted(rejected), np.intp)


_SHARED: dict[tuple[int, str, object], LayoutDecoder] = {}


def decode_shared(typestore: Any, msgtype: str, raws: list[bytes], where: str = 'bag',
                  keep: Callable[[str], bool] | None = None) -> tuple[list[Columns], np.ndarray]:
    """:meth:`LayoutDecoder.decode` with one decoder per (type, ``keep``)
    for the process: the bags of an audit share their layouts (a robot's
    joint names and frames, a suite's predicate names), each parsed once.
    A decoder over half full starts afresh, and one that rejects messages
    after earlier bags filled it is retried fresh, so a bag is decoded
    exactly as by a decoder of its own."""
    key = (id(typestore), msgtype, keep)
    dec = _SHARED.get(key)
    if dec is None or len(dec.layouts) > MAX_LAYOUTS // 2:
        dec = _SHARED[key] = LayoutDecoder(typestore, msgtype, keep)
    had = len(dec.layouts)
    columns, rejected = dec.decode(raws, where)
    if len(rejected) and had:
        dec = _SHARED[key] = LayoutDecoder(typestore, msgtype, keep)
        columns, rejected = dec.decode(raws, where)
    return columns, rejected


def _gather(arr: np.ndarray, hit: np.ndarray | None, lay: Layout,
            keep: Callable[[str], bool] | None) -> Numbers:
    """The number columns (those ``keep`` takes) of the rows ``hit`` (None:
    every row): the numbers of one dtype are gathered together and viewed as
    that dtype.
    Where they all sit at the same offset modulo their size (CDR aligns
    them so), the rows' bytes from there are viewed as that dtype and whole
    numbers are gathered (an eighth of the elements for ``float64``);
    otherwise their bytes are gathered and viewed.  Which, for each dtype,
    is worked out once per layout and ``keep`` (a layout is met in many
    chunks and bags)."""
    plan = lay.gather_plans.get(keep)
    if plan is None:
        plan = lay.gather_plans[keep] = _gather_plan(lay, keep)
    steps, where = plan
    rows = arr if hit is None or len(hit) == len(arr) else arr[hit]
    blocks = {}
    for dtype, start, index in steps:
        if start is None:               # bytes, then viewed
            blocks[dtype] = np.ascontiguousarray(rows[:, index]).view(dtype)
        else:                           # whole numbers from the aligned view
            size = int(dtype[-1])
            span = (lay.length - start) // size * size
            blocks[dtype] = rows[:, start:start + span].view(dtype)[:, index]
    return Numbers(blocks, where)


def _gather_plan(lay: Layout, keep: Callable[[str], bool] | None
                 ) -> tuple[list[tuple[str, int | None, np.ndarray]], dict[str, tuple[str, int]]]:
    """Per dtype: (dtype, the common offset modulo its size or None, the
    number indices in the view from there or the byte indices); and where
    each path's column is."""
    by_dtype: dict[str, list[tuple[str, int]]] = {}
    for path, (offset, dtype) in lay.numbers.items():
        if keep is None or keep(path):
            by_dtype.setdefault(dtype, []).append((path, offset))
    steps: list[tuple[str, int | None, np.ndarray]] = []
    for dtype, items in by_dtype.items():
        size = int(dtype[-1])
        offsets = np.array([o for _, o in items], np.intp)
        start = int(offsets.min()) % size
        if size > 1 and (offsets % size == start).all():
            steps.append((dtype, start, (offsets - start) // size))
        else:
            steps.append((dtype, None, (offsets[:, None] + np.arange(size)).ravel()))
    where = {path: (dtype, col) for dtype, items in by_dtype.items() for col, (path, _) in enumerate(items)}
    return steps, where
