"""Simulation side: scripted rollouts and fault injection (pure Python), and
the robosuite/MuJoCo world the bridge node steps (robosuite imported on first
use, so importing this package stays light)."""

ROBOT_CONFIGS = {'Lift': 'robosuite_lift.yaml', 'PickPlace': 'robosuite_pickplace.yaml', 'Stack': 'robosuite_stack.yaml'}
"""Each simulated task's robot configuration in config/robots/ (the shipped
configuration the demo runs live and the faithfulness benchmark judges)."""

__all__ = ['ROBOT_CONFIGS']
