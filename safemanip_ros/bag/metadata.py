"""A bag's ``metadata.yaml`` and split index checked where they enter.

A bag may come from anywhere (a colleague's laptop, a fleet upload), so the
fields this package reads from it are checked before any is used:

* split names (``relative_file_paths``, ``files[].path``, the index's
  ``file.path``) are file names inside the bag.  rosbags reads each split as
  the bag folder joined with the name's last part (older rosbag2 wrote the
  bag's folder in front of it), and so do we; an absolute name, a name with a
  ``..`` part, or one that is no file name at all is refused, so a name from
  a file never becomes a path outside the bag;
* counts and times are non-negative integers, lists are lists (a string is
  not a list of its letters), mappings are mappings.

A malformed ``metadata.yaml`` raises :class:`BagMetadataError` naming the
file and the field; a malformed line of the index is left out (as a torn
last line is) with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from .errors import BagReadError

__all__ = ['BagMetadataError', 'check_info', 'index_entry_problem', 'split_file_name']


class BagMetadataError(BagReadError):
    """A ``metadata.yaml`` whose fields cannot be used (names the file and field)."""


def split_file_name(name: Any) -> str | None:
    """The file name inside the bag that split ``name`` stands for (its last
    part, as rosbags reads it), or None when ``name`` is not one: not a
    string, empty, absolute, with a ``..`` part, or with a NUL or a backslash."""
    if not isinstance(name, str) or not name or '\0' in name or '\\' in name:
        return None
    path = PurePosixPath(name)
    if path.is_absolute() or '..' in path.parts:
        return None
    base = path.name
    return base if base not in ('', '.', '..') else None


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _problem(info: Any) -> str | None:
    """What is wrong with ``rosbag2_bagfile_information`` (a field and why), or None."""
    if not isinstance(info, Mapping):
        return f'rosbag2_bagfile_information: expected a mapping, got {type(info).__name__}'
    names = info.get('relative_file_paths')
    if not isinstance(names, list):
        return f'relative_file_paths: expected a list of split file names, got {names!r:.60}'
    for i, name in enumerate(names):
        if split_file_name(name) is None:
            return f'relative_file_paths[{i}]: {name!r:.60} is not a file name inside the bag'
    files = info.get('files')
    if files is not None:
        if not isinstance(files, list):
            return f'files: expected a list, got {files!r:.60}'
        for i, f in enumerate(files):
            if not isinstance(f, Mapping) or split_file_name(f.get('path')) is None:
                return f'files[{i}].path: {(f.get("path") if isinstance(f, Mapping) else f)!r:.60} ' \
                       'is not a file name inside the bag'
            if 'message_count' in f and not _count(f['message_count']):
                return f'files[{i}].message_count: expected a count >= 0, got {f["message_count"]!r:.40}'
    if 'message_count' in info and not _count(info['message_count']):
        return f'message_count: expected a count >= 0, got {info["message_count"]!r:.40}'
    topics = info.get('topics_with_message_count')
    if topics is not None:
        if not isinstance(topics, list):
            return f'topics_with_message_count: expected a list, got {topics!r:.60}'
        for i, t in enumerate(topics):
            if not isinstance(t, Mapping) or not isinstance(t.get('topic_metadata'), Mapping) \
                    or not isinstance(t['topic_metadata'].get('name'), str):
                return f'topics_with_message_count[{i}]: expected {{topic_metadata: {{name: ...}}, message_count: N}}'
            if not _count(t.get('message_count', 0)):
                return f'topics_with_message_count[{i}].message_count: expected a count >= 0, ' \
                       f'got {t.get("message_count")!r:.40}'
    for key, sub in (('starting_time', 'nanoseconds_since_epoch'), ('duration', 'nanoseconds')):
        if key in info and not (isinstance(info[key], Mapping) and _count(info[key].get(sub, 0))):
            return f'{key}.{sub}: expected an integer >= 0, got {info[key]!r:.60}'
    return None


def check_info(bag: Path, info: Any) -> dict[str, Any]:
    """``info`` (a bag's ``rosbag2_bagfile_information``) as a dict, once
    its fields are checked, with each split named by its file name in the bag
    (:func:`split_file_name`).

    Raises:
        BagMetadataError: naming ``bag/metadata.yaml`` and the first bad field.
    """
    problem = _problem(info)
    if problem is not None:
        raise BagMetadataError(f'{bag / "metadata.yaml"}: {problem}')
    out = dict(info)
    out['relative_file_paths'] = [split_file_name(n) for n in info['relative_file_paths']]
    if info.get('files') is not None:
        out['files'] = [dict(f, path=split_file_name(f['path'])) for f in info['files']]
    return out


def index_entry_problem(entry: Any) -> str | None:
    """What is wrong with one line of a bag's split index (the writer's
    ``{file, message_count, topics_with_message_count}``), or None."""
    if not isinstance(entry, Mapping):
        return 'not a mapping'
    f = entry.get('file')
    if not isinstance(f, Mapping) or split_file_name(f.get('path')) != f.get('path'):
        return 'file.path is not a file name inside the bag'
    if not _count(entry.get('message_count')):
        return 'message_count is not a count >= 0'
    for key, sub in (('starting_time', 'nanoseconds_since_epoch'), ('duration', 'nanoseconds')):
        if not (isinstance(f.get(key), Mapping) and _count(f[key].get(sub))):
            return f'file.{key}.{sub} is not an integer >= 0'
    topics = entry.get('topics_with_message_count')
    if not isinstance(topics, list) or not all(
            isinstance(t, Mapping) and isinstance(t.get('topic_metadata'), Mapping)
            and isinstance(t['topic_metadata'].get('name'), str) and _count(t.get('message_count'))
            for t in topics):
        return 'topics_with_message_count is not a list of {topic_metadata: {name}, message_count >= 0}'
    return None
