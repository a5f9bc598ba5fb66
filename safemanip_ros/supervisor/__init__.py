"""Responses to violations (pure, no ROS): the response policy, the
pause/retract/resume state machine and retract trajectories."""

from .policy import Action, ResponsePolicy, Supervisor, without_retry_count
from .retract import JointHistory, retract_path

__all__ = ['Action', 'JointHistory', 'ResponsePolicy', 'Supervisor', 'retract_path', 'without_retry_count']
