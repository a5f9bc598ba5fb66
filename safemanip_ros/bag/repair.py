"""Repairing a split bag whose ``metadata.yaml`` does not list every split
(the recorder was killed between moving a finished split into the bag and
rewriting the metadata).

:class:`~safemanip_ros.bag.writer.SplitBagWriter` appends each finished
split's file entry and topic counts to the bag's index ``.splits.jsonl``
before moving the file in, so the metadata can be rebuilt from the index for
every split file present.  The split that was still open at the kill (in
``.open/``) is not a complete file and is reported as lost (at most
``split_s`` seconds).

:func:`repaired_metadata` computes the repaired metadata without writing;
:func:`repair_bag` writes it (``safemanip bag repair DIR``); the audit reads a
bag through the repaired metadata without touching the bag.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import BagError
from .metadata import check_info, index_entry_problem
from .writer import INDEX_NAME, write_metadata


class BagRepairError(BagError):
    """A bag that cannot be repaired (names the bag and the reason)."""


@dataclass
class RepairReport:
    bag: str
    added: list[str] = field(default_factory=list)        # split files listed again
    lost_open_splits: list[str] = field(default_factory=list)
    unindexed: list[str] = field(default_factory=list)    # split files neither listed nor indexed
    bad_index_lines: list[str] = field(default_factory=list)   # malformed lines of the index, left out

    @property
    def changed(self) -> bool:
        return bool(self.added)

    def lines(self) -> list[str]:
        """What the repair did, then :meth:`problems`."""
        return [f'{self.bag}: listed again {len(self.added)} split(s) missing from metadata.yaml'
                + (f': {", ".join(self.added)}' if self.added else '')] + self.problems()

    def problems(self) -> list[str]:
        """What no repair brings back: the split open at the interruption, unindexed files."""
        out = []
        if self.lost_open_splits:
            out.append(f'{self.bag}: the split open at the interruption is incomplete and lost: '
                       f'{", ".join(self.lost_open_splits)}')
        if self.unindexed:
            out.append(f'{self.bag}: split files neither in metadata.yaml nor in {INDEX_NAME} (left out): '
                       f'{", ".join(self.unindexed)}')
        if self.bad_index_lines:
            out.append(f'{self.bag}: malformed lines of {INDEX_NAME} left out: {"; ".join(self.bad_index_lines)}')
        return out


def _load_metadata(bag: Path) -> dict[str, Any]:
    """The bag's checked ``rosbag2_bagfile_information`` (:func:`.metadata.check_info`).

    Raises:
        BagRepairError: no readable metadata.yaml.
        BagMetadataError: one whose fields are malformed or name a file outside the bag.
    """
    from ruamel.yaml import YAMLError  # type: ignore[attr-defined]

    from .compat import load_metadata
    try:
        doc = load_metadata((bag / 'metadata.yaml').read_text())
        info = doc['rosbag2_bagfile_information']
    except (OSError, UnicodeDecodeError, YAMLError, KeyError, TypeError) as err:
        raise BagRepairError(f'{bag}: unreadable metadata.yaml: {err}') from err
    return check_info(bag, info)


def _index(bag: Path, report: 'RepairReport') -> dict[str, dict[str, Any]]:
    """The bag's split index by file name; a malformed line is left out and
    said in ``report.bad_index_lines`` (a torn last line, killed while
    appending, is that split not moved in yet: left out quietly)."""
    path = bag / INDEX_NAME
    out: dict[str, dict[str, Any]] = {}
    if not path.is_file():
        return out
    lines = path.read_text(errors='replace').splitlines()
    for number, line in enumerate(lines, 1):
        try:
            entry = json.loads(line)
        except ValueError:
            if number < len(lines):
                report.bad_index_lines.append(f'line {number}: not JSON')
            continue
        problem = index_entry_problem(entry)
        if problem is not None:
            report.bad_index_lines.append(f'line {number}: {problem}')
            continue
        out[entry['file']['path']] = entry
    return out


def repaired_metadata(bag: str | Path) -> tuple[dict[str, Any], RepairReport]:
    """(the metadata ``rosbag2_bagfile_information`` listing every complete
    split present, what changed)."""
    bag = Path(bag)
    info = _load_metadata(bag)
    report = RepairReport(str(bag))
    listed = list(info['relative_file_paths'])
    index = _index(bag, report)
    suffixes = {'.mcap', '.db3'}
    present = sorted((p.name for p in bag.iterdir() if p.suffix in suffixes), key=lambda n: (len(n), n))
    open_dir = bag / '.open'
    if open_dir.is_dir():
        report.lost_open_splits = sorted(str(p.relative_to(bag)) for p in open_dir.rglob('*')
                                         if p.suffix in suffixes)
    missing = [n for n in present if n not in listed]
    add = [n for n in missing if n in index]
    report.unindexed = [n for n in missing if n not in index]
    if not add:
        return info, report
    report.added = add
    files = list(info.get('files') or [])
    topics = {t['topic_metadata']['name']: dict(t, topic_metadata=dict(t['topic_metadata']))
              for t in info.get('topics_with_message_count') or []}
    count = int(info.get('message_count') or 0)
    start = int((info.get('starting_time') or {}).get('nanoseconds_since_epoch', 0)) if listed else None
    end = (start or 0) + int((info.get('duration') or {}).get('nanoseconds', 0)) if listed else 0
    for name in add:
        entry = index[name]
        files.append(entry['file'])
        count += int(entry['message_count'])
        f_start = int(entry['file']['starting_time']['nanoseconds_since_epoch'])
        start = f_start if start is None else min(start, f_start)
        end = max(end, f_start + int(entry['file']['duration']['nanoseconds']))
        for t in entry['topics_with_message_count']:
            name_t = t['topic_metadata']['name']
            if name_t in topics:
                topics[name_t]['message_count'] += int(t['message_count'])
            else:
                topics[name_t] = {'topic_metadata': dict(t['topic_metadata']), 'message_count': int(t['message_count'])}
    order = sorted(listed + add, key=lambda n: (len(n), n))
    by_path = {f['path']: f for f in files}
    info = dict(info)
    info['relative_file_paths'] = order
    info['files'] = [by_path[n] for n in order if n in by_path]
    info['message_count'] = count
    info['topics_with_message_count'] = list(topics.values())
    info['starting_time'] = {'nanoseconds_since_epoch': start or 0}
    info['duration'] = {'nanoseconds': max(0, end - (start or 0))}
    return info, report


def repair_bag(bag: str | Path) -> RepairReport:
    """Rewrite ``metadata.yaml`` so it lists every complete split present."""
    bag = Path(bag)
    info, report = repaired_metadata(bag)
    if report.changed:
        write_metadata(bag, info)
    return report
