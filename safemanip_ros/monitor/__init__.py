"""The monitor: frames, derived predicates, episode machines, violation episodes
and per-trigger metrics (SEMANTICS.md §1, §3-§5); no ROS, no sensors."""

from .core import Episode, Episodes, InstanceResult, Monitor, RolloutResult, StepResult

__all__ = ['Episode', 'Episodes', 'InstanceResult', 'Monitor', 'RolloutResult', 'StepResult']
