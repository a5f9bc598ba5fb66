"""YAML loading that remembers where every value came from.

Mappings load as :class:`Located` dicts that know the line of each key, so
validation errors can say ``file:line: field: problem``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ..errors import SpecError


class Located(dict[str, Any]):
    """A dict that knows its file and the (1-based) line of each key."""

    file: str = '<memory>'
    line: int = 0
    key_lines: dict[str, int]

    def line_of(self, key: str) -> int:
        return self.key_lines.get(key, self.line)

    def where(self, key: str | None = None) -> str:
        return f'{self.file}:{self.line if key is None else self.line_of(key)}'


class LocatedList(list[Any]):
    file: str = '<memory>'
    line: int = 0
    item_lines: list[int]

    def where(self, index: int | None = None) -> str:
        line = self.line if index is None or index >= len(self.item_lines) else self.item_lines[index]
        return f'{self.file}:{line}'


# libyaml's parser when PyYAML was built with it (about 10x faster on a suite file; its marks carry
# the same lines), the pure-Python one otherwise.
class _Loader(getattr(yaml, 'CSafeLoader', yaml.SafeLoader)):  # type: ignore[misc]  # PyYAML ships no types
    pass


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> Located:
    out = Located()
    out.file = loader.name
    out.line = node.start_mark.line + 1
    out.key_lines = {}
    loader.flatten_mapping(node)
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, (str, int, float, bool)) and key is not None:
            raise SpecError(f'{loader.name}:{key_node.start_mark.line + 1}: mapping keys must be scalars')
        if key in out:
            raise SpecError(f'{loader.name}:{key_node.start_mark.line + 1}: duplicate key {key!r}')
        out[key] = loader.construct_object(value_node, deep=True)  # type: ignore[index]  # scalar keys, as YAML
        out.key_lines[str(key)] = key_node.start_mark.line + 1
    return out


def _construct_sequence(loader: _Loader, node: yaml.SequenceNode) -> LocatedList:
    out = LocatedList(loader.construct_object(child, deep=True) for child in node.value)
    out.file = loader.name
    out.line = node.start_mark.line + 1
    out.item_lines = [child.start_mark.line + 1 for child in node.value]
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


MAX_EXPANDED_NODES = 100_000
"""Most nodes a document may hold once its aliases are expanded: a handful
of nested anchors (the "billion laughs") would otherwise expand to
millions of values wherever the document is walked."""


def load_yaml(path: str | Path) -> Any:
    """Load one YAML document with located mappings and sequences."""
    path = Path(path)
    try:
        text = path.read_text(encoding='utf-8')
    except OSError as err:
        raise SpecError(f'{path}: cannot read: {err.strerror or err}') from err
    except UnicodeDecodeError as err:
        line = path.read_bytes()[:err.start].count(b'\n') + 1
        raise SpecError(f'{path}:{line}: not UTF-8 text ({err.reason} at byte {err.start}); save the file as '
                        f'UTF-8') from err
    return loads_yaml(text, str(path))


def loads_yaml(text: str, name: str = '<memory>') -> Any:
    try:
        loader = _Loader(text)
    except yaml.reader.ReaderError as err:      # a control character: YAML refuses the text outright
        raise _not_text(err, text, name) from err
    loader.name = name
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        expanded = _expanded_size(node)
        if expanded > MAX_EXPANDED_NODES:
            raise SpecError(f'{name}:{node.start_mark.line + 1}: its aliases expand to over {MAX_EXPANDED_NODES:,} '
                            f'values (nested anchors); write the values out or use fewer aliases')
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = mark.line + 1 if mark else 0
        raise SpecError(f'{name}:{line}: invalid YAML: {err.problem or err.context}') from err
    except yaml.reader.ReaderError as err:
        raise _not_text(err, text, name) from err
    except RecursionError as err:
        raise SpecError(f'{name}: YAML nested too deeply') from err
    finally:
        loader.dispose()


def _not_text(err: yaml.reader.ReaderError, text: str, name: str) -> SpecError:
    """A character YAML does not allow (NUL, most control characters), named with its line."""
    char = err.character if isinstance(err.character, int) else ord(str(err.character)[:1] or '\0')
    line = text[:max(0, int(err.position))].count('\n') + 1
    return SpecError(f'{name}:{line}: not YAML text: character #x{char:04x} is not allowed')


def _expanded_size(root: yaml.Node) -> int:
    """Nodes of the document with every alias expanded, counted over the
    node graph (an anchored node's count is computed once), stopping once
    past the budget; recursive aliases count as past it."""
    size: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    open_: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            open_.discard(key)
            children = _children(node)
            size[key] = min(1 + sum(size[id(c)] for c in children), MAX_EXPANDED_NODES + 1)
            continue
        if key in size:
            continue
        if key in open_:
            return MAX_EXPANDED_NODES + 1      # a node that contains itself
        open_.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in size)
    return size[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []
