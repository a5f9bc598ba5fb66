"""``safemanip_ros/PredicateArray`` messages from CDR bytes to numpy columns,
a whole bag at a time.

A publisher repeats its layout — the same predicate names, in the same
order, with the same source strings — so all its messages have the same
length and the same bytes everywhere except the stamps, the sequence
number and the value/unknown flags.  The first message of a layout is
walked field by field (:func:`parse_predicate_array`, on the generic
:func:`~.layouts.parse_layout`), which gives the offsets of those
variable bytes; every message of the same length whose other bytes equal
that template is then decoded by indexing one ``uint8[messages, length]``
array.  A message that matches no template is parsed on its own (and
becomes a template).  Values are those of rosbags' deserializer, bit for
bit (``test/test_bag_columns.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .layouts import MAX_LAYOUTS, Layout, LayoutError, decode_shared, parse_layout
from .typestore import typestore

PREDICATE_TYPE = 'safemanip_ros/msg/PredicateArray'


class ColumnDecodeError(LayoutError):
    """A message is not a well-formed little-endian CDR PredicateArray."""


@dataclass
class PredicateLayout:
    """One ``PredicateArray`` layout (:class:`~.layouts.Layout`): its
    predicate names, in message order."""

    layout: Layout
    names: tuple[str, ...]


def parse_predicate_array(raw: bytes, where: str = 'message') -> PredicateLayout:
    """The layout of one message, by walking its fields."""
    try:
        return _predicate_view(parse_layout(typestore(), PREDICATE_TYPE, raw, where))
    except LayoutError as err:
        raise ColumnDecodeError(str(err)) from None


def _predicate_view(lay: Layout) -> PredicateLayout:
    items = [f'predicates[{k}]' for k in range(lay.sequence_lengths['predicates'])]
    return PredicateLayout(lay, tuple(lay.strings[f'{p}.name'] for p in items))


@dataclass
class PredicateColumns:
    """The messages of one layout: their positions in the input, bag times,
    header stamps (ns), and values/unknown flags per predicate."""

    layout: PredicateLayout
    rows: np.ndarray          # intp[n]: index into the decoded message list
    stamp_ns: np.ndarray      # int64[n]: header stamps
    values: np.ndarray        # bool[n, P]
    unknown: np.ndarray       # bool[n, P]


def _audited(path: str) -> bool:
    """The numbers the audit reads: header stamp, values, unknown flags."""
    return path.startswith('header.stamp.') or path.endswith(('.value', '.unknown'))


def decode_predicate_arrays(raws: list[bytes], where: str = 'bag') -> list[PredicateColumns]:
    """Decode every message; one :class:`PredicateColumns` per layout met.
    Raises :class:`ColumnDecodeError` for a message no layout takes: a
    malformed one, or one past the decoder's layout limit (the caller then
    reads the bag message by message; nothing is dropped)."""
    columns, rejected = decode_shared(typestore(), PREDICATE_TYPE, raws, where, _audited)
    if len(rejected):
        k = int(rejected[0])
        parse_predicate_array(raws[k], f'{where}: message {k}')     # raises, saying why, if malformed
        raise ColumnDecodeError(f'{where}: more than {MAX_LAYOUTS} message layouts (predicate names or sources '
                                f'change from message to message)')
    out = []
    for c in columns:
        lay = _predicate_view(c.layout)
        n = len(lay.names)
        out.append(PredicateColumns(
            lay, c.rows, c.numbers['header.stamp.sec'].astype(np.int64) * 1_000_000_000
            + c.numbers['header.stamp.nanosec'].astype(np.int64),
            c.stack([f'predicates[{k}].value' for k in range(n)]) != 0,
            c.stack([f'predicates[{k}].unknown' for k in range(n)]) != 0))
    return out
