"""Another stack on our DDS domain: a newcomer's supervisor once took another
stack's violation and "confirmed" a pause of that arm.  Once the stack is up,
the graph is asked for nodes with our monitor's and supervisor's names that
are not ours, and for other publishers of our hold topic; each is said in one
warning naming the domain."""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

__all__ = ['others_on_domain']


def others_on_domain(node: Any, ours: list[tuple[str, str]], hold_topic: str | None) -> str | None:
    """A warning naming what else answers on this domain, or None.
    ``ours``: (name, namespace) of this stack's nodes to look for twins of;
    ``hold_topic``: the supervisor's resolved controller topic (None: no supervisor)."""
    seen = Counter(node.get_node_names_and_namespaces())
    mine = Counter(ours)
    found = []
    for (name, ns), count in sorted(mine.items()):
        extra = seen[(name, ns)] - count
        if extra > 0:
            found.append(f'{extra} other node{"s" * (extra > 1)} named {ns.rstrip("/")}/{name}')
    if hold_topic:
        extra = node.count_publishers(hold_topic) - 1
        if extra > 0:
            found.append(f'{extra} other publisher{"s" * (extra > 1)} of holds on {hold_topic}')
    if not found:
        return None
    domain = os.environ.get('ROS_DOMAIN_ID', '0')
    return (f'another stack answers on ROS_DOMAIN_ID {domain}: {"; ".join(found)}. Their violations, holds and '
            f'acknowledgements mix with this one\'s: give each stack a domain of its own (ROS_DOMAIN_ID)')
