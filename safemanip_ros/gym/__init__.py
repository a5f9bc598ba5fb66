"""Gymnasium integration (no rclpy; needs the ``gym`` extra: ``pip install
"safemanip_ros[gym]"``): :class:`SpecMonitor` and :class:`SpecMonitorVector`
monitor any environment's propositions with the monitor core;
:class:`LetterWorld` is SpecRLBench's Letter domain, registered as
``safemanip/LetterWorld-v0``; ``safemanip/RobosuiteLift-v0`` is the
robosuite Lift task labelled with propositions (needs the ``sim`` extra)."""

from __future__ import annotations

import gymnasium

from .letterworld import GreedyPolicy, LetterWorld, RandomPolicy, rollout
from .wrapper import SpecMonitor, SpecMonitorVector

if 'safemanip/LetterWorld-v0' not in gymnasium.registry:
    gymnasium.register('safemanip/LetterWorld-v0', entry_point='safemanip_ros.gym.letterworld:LetterWorld')
if 'safemanip/RobosuiteLift-v0' not in gymnasium.registry:
    gymnasium.register('safemanip/RobosuiteLift-v0', entry_point='safemanip_ros.gym.lift:LiftEnv')

__all__ = ['GreedyPolicy', 'LetterWorld', 'RandomPolicy', 'SpecMonitor', 'SpecMonitorVector', 'rollout']
