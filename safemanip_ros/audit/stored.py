"""Per-frame timeline data left in the result files, not in memory.

A rollout's result carries, beside its counts, three per-frame fields: the
runs of its predicates (``predicates``), of its verdicts (``verdicts``) and
its drawn timeline (``timeline_svg``).  They are about two thirds of a
result in memory (about 100 KB of Python objects for a 300-frame rollout of
the SafeManip suite), and only report.json and report.html read them, once
each.  An audit of a fleet (17,500 rollouts) that kept them held 3.7 GB.

So :func:`~.engine.run_audit` can return *detached* results
(``detach_timelines=True``, what ``safemanip audit`` does): each of those
fields is a :class:`StoredField`, a reference into the source's result file
``OUT/episodes/<name>.json`` (written before, and checked by its key when
read).  :func:`~.report.report_json`, :func:`~.report.write_report_json`,
:func:`~.report.timeline_svg` and :func:`~.report.write_html` read through
them with :func:`resolved`; the report's text is the same as from attached
results.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..errors import SafemanipError

if TYPE_CHECKING:
    from .schema import SourceResult

TIMELINE_FIELDS = ('predicates', 'verdicts', 'timeline_svg')
"""A rollout result's per-frame fields (see :class:`~.schema.RolloutRecord`)."""


class StoredResultError(SafemanipError):
    """A result file a detached result points to is gone or was rewritten."""


@dataclass(frozen=True)
class StoredField:
    """Field ``field`` of rollout ``index`` of the result file ``file``,
    whose key must still be ``key``; ``ordinal``: its place among the
    ``count`` rollouts of the file that have that field."""

    file: str
    key: str
    index: int
    field: str
    ordinal: int
    count: int

    def load(self) -> Any:
        """The field's value, read from the file.

        Only that value is decoded, not the whole file: a result file is
        written by the audit in compact JSON, where the text ``"<field>":``
        is a key (a quote inside a string is escaped), so when the file
        holds exactly ``count`` of them the ``ordinal``-th is this one.
        Otherwise (a predicate named like the field, another writer) the
        whole file is decoded.  The last file read is kept, so a rollout's
        fields, read one after another, cost one read.

        Raises:
            StoredResultError: the file is unreadable, or holds another key
                (it was rewritten after the audit computed this result).
        """
        text = _text(self.file, self.key)
        at = _positions(text, self.field)
        if len(at) == self.count:
            try:
                return _DECODER.raw_decode(text, at[self.ordinal])[0]
            except ValueError:
                pass            # not what the audit writes: decoded whole below
        return _decoded(self.file, self.key)[self.index][self.field]


def resolved(value: Any) -> Any:
    """``value``, or what it refers to when it is a :class:`StoredField`."""
    return value.load() if isinstance(value, StoredField) else value


def detached(result: SourceResult, file: Path | str, key: str) -> SourceResult:
    """``result`` (a source's, as written to ``file`` under ``key``) with
    each rollout's per-frame fields replaced by references into ``file``."""
    counts = {name: sum(name in ep for ep in result['episodes']) for name in TIMELINE_FIELDS}
    seen = dict.fromkeys(TIMELINE_FIELDS, 0)
    rollouts = []
    for index, ep in enumerate(result['episodes']):
        light = dict(ep)
        for name in TIMELINE_FIELDS:
            if name in light:
                light[name] = StoredField(str(file), key, index, name, seen[name], counts[name])
                seen[name] += 1
        rollouts.append(light)
    # The rollouts' per-frame fields are references now (RolloutRecord says so).
    return cast('SourceResult', {**result, 'episodes': rollouts})


_DECODER = json.JSONDecoder()
_last_text: tuple[tuple[str, str], str, dict[str, list[int]]] | None = None
_last_decoded: tuple[tuple[str, str], list[dict[str, Any]]] | None = None


def _text(file: str, key: str) -> str:
    """The text of ``file``, checked to hold ``key``."""
    global _last_text
    if _last_text is not None and _last_text[0] == (file, key):
        return _last_text[1]
    try:
        text = Path(file).read_text()
    except OSError as err:
        raise _unreadable(file, err) from err
    # The audit writes the key last; a file that ends otherwise is checked by decoding it.
    if not text.endswith(f',"key":{json.dumps(key)}}}'):
        _decoded(file, key, text)
    _last_text = ((file, key), text, {})
    return text


def _positions(text: str, field: str) -> list[int]:
    """Where each value of key ``field`` starts in ``text`` (the last file's)."""
    assert _last_text is not None and _last_text[1] is text
    found = _last_text[2].get(field)
    if found is None:
        marker = f'"{field}":'
        found = []
        at = text.find(marker)
        while at >= 0:
            found.append(at + len(marker))
            at = text.find(marker, at + len(marker))
        _last_text[2][field] = found
    return found


def _decoded(file: str, key: str, text: str | None = None) -> list[dict[str, Any]]:
    """The rollouts of ``file``, decoded whole, checked to hold ``key``."""
    global _last_decoded
    if _last_decoded is not None and _last_decoded[0] == (file, key):
        return _last_decoded[1]
    try:
        data = json.loads(Path(file).read_text() if text is None else text)
    except (OSError, ValueError) as err:
        raise _unreadable(file, err) from err
    if not isinstance(data, dict) or data.get('key') != key:
        raise StoredResultError(f'{file}: changed after the audit wrote it; run the audit again')
    _last_decoded = ((file, key), data['episodes'])
    return _last_decoded[1]


def _unreadable(file: str, err: Exception) -> StoredResultError:
    return StoredResultError(f'{file}: result file unreadable after the audit wrote it ({err}); run the audit again')
