"""Per-frame timeline data left in the result files, not in memory.

An episode's result carries, beside its counts, three per-frame fields: the
runs of its predicates (``predicates``), of its verdicts (``verdicts``) and
its drawn timeline (``timeline_svg``).  They are about two thirds of a
result in memory (about 100 KB of Python objects for a 300-frame episode of
the SafeManip suite), and only report.json and report.html read them, once
each.  An audit of a fleet (17,500 episodes) that kept them held 3.7 GB.

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
from typing import Any

from ..errors import SafemanipError

TIMELINE_FIELDS = ('predicates', 'verdicts', 'timeline_svg')
"""An episode result's per-frame fields (see :class:`~.schema.EpisodeRecord`)."""


class StoredResultError(SafemanipError):
    """A result file a detached result points to is gone or was rewritten."""


@dataclass(frozen=True)
class StoredField:
    """Field ``field`` of episode ``index`` of the result file ``file``,
    whose key must still be ``key``."""

    file: str
    key: str
    index: int
    field: str

    def load(self) -> Any:
        """The field's value, read from the file (the last file read is
        kept, so an episode's fields, read one after another, cost one read).

        Raises:
            StoredResultError: the file is unreadable, or holds another key
                (it was rewritten after the audit computed this result).
        """
        return _episodes(self.file, self.key)[self.index][self.field]


def resolved(value: Any) -> Any:
    """``value``, or what it refers to when it is a :class:`StoredField`."""
    return value.load() if isinstance(value, StoredField) else value


def detached(result: dict, file: Path | str, key: str) -> dict:
    """``result`` (a source's, as written to ``file`` under ``key``) with
    each episode's per-frame fields replaced by references into ``file``."""
    episodes = []
    for index, ep in enumerate(result['episodes']):
        light = dict(ep)
        for name in TIMELINE_FIELDS:
            if name in light:
                light[name] = StoredField(str(file), key, index, name)
        episodes.append(light)
    return {**result, 'episodes': episodes}


_last: tuple[tuple[str, str], list[dict]] | None = None


def _episodes(file: str, key: str) -> list[dict]:
    global _last
    if _last is not None and _last[0] == (file, key):
        return _last[1]
    try:
        data = json.loads(Path(file).read_text())
    except (OSError, ValueError) as err:
        raise StoredResultError(f'{file}: result file unreadable after the audit wrote it ({err}); '
                                f'run the audit again') from err
    if not isinstance(data, dict) or data.get('key') != key:
        raise StoredResultError(f'{file}: changed after the audit wrote it; run the audit again')
    _last = ((file, key), data['episodes'])
    return _last[1]
