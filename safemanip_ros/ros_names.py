"""ROS 2 topic and namespace names checked where they enter (options,
configuration files), without rclpy: a name rcl would refuse later (as an
exception inside a node, exit 70) is one line naming the option or field.

Substitutions (``{node}``, ``{ns}``) are refused: a name from a file or an
option is taken as written, never expanded.
"""

from __future__ import annotations

import re

__all__ = ['namespace_problem', 'optional_topic_problem', 'topic_problem']

_TOKEN = re.compile(r'[A-Za-z_][A-Za-z0-9_]*\Z')


def topic_problem(name: str) -> str | None:
    """What rcl would refuse in topic or service name ``name`` (absolute,
    relative or ``~/``-private), or None: ``'/arm/joint_states'`` passes,
    ``'/x/{y}'`` does not."""
    if not isinstance(name, str) or not name:
        return 'an empty topic name'
    if '{' in name or '}' in name:
        return f'{name!r}: ROS substitutions ({{...}}) are not expanded here; give the name itself'
    body = name
    if body.startswith('~'):      # the node's private namespace; rcl also takes '~x' (as '/<node>x')
        body = body[2:] if body.startswith('~/') else body[1:]
        if not body:
            return None
    elif body.startswith('/'):
        body = body[1:]
    if not body:
        return f'{name!r}: no name after the namespace'
    if body.endswith('/'):
        return f"{name!r}: a name must not end with '/'"
    for token in body.split('/'):
        if not token:
            return f"{name!r}: an empty part ('//')"
        if not _TOKEN.match(token):
            return f'{name!r}: part {token!r} must be letters, digits and underscores, not starting with a digit'
    return None


def optional_topic_problem(name: str) -> str | None:
    """:func:`topic_problem` for an option or parameter where '' means none configured."""
    return topic_problem(name) if name else None


def namespace_problem(ns: str) -> str | None:
    """What is wrong with robot namespace ``ns`` (leading and trailing '/'
    allowed, '' the root), or None."""
    inner = ns.strip('/')
    if not inner:
        return None
    problem = topic_problem('/' + inner)
    return None if problem is None else problem.replace(repr('/' + inner), repr(ns))
