"""Every property instance's newest verdict, from the monitor's verdict stream.

The monitor's ``VerdictArray`` lists every instance now and then and,
between, only the instances whose verdict, mode or recovery verdict
changed (docs/nodes.md, Verdicts).  A subscriber that shows every instance
keeps their merge within the rollout: :class:`VerdictBoard`, used by
``safemanip watch`` and by the Foxglove view.  It reads the messages by
their fields only (rclpy's or rosbags' classes alike); no ROS here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ['VerdictBoard']


@dataclass
class VerdictBoard:
    """Every instance's newest Verdict within the current rollout, merged
    from the monitor's VerdictArray messages (each lists all instances or
    only those that changed); a new rollout id starts a new board."""

    episode_id: str | None = None
    by_instance: dict[str, Any] = field(default_factory=dict)

    def update(self, msg: Any) -> None:
        if msg.episode_id != self.episode_id:
            self.episode_id = msg.episode_id
            self.by_instance = {}
        for v in msg.verdicts:
            self.by_instance[v.instance] = v

    def __len__(self) -> int:
        return len(self.by_instance)
