"""The Foxglove layout for the monitor's channels (``config/foxglove/safemanip.json``).

A layout is the JSON file Foxglove imports (Layouts, Import from file):
panels by id and their arrangement.  :func:`layout` makes ours for a suite's
property instances:

* **3D** — the robot drawn from TF and its scene's objects
  (``/safemanip/robot``), TF's frames, and ``/safemanip/markers``: a red box on each
  object an open violation names (its instances as a label), an orange
  sphere on the gripper while a hold is on; following the world frame.
* **Verdicts** (State Transitions) — one row per instance, its state over
  time (``presumably_true``, ``presumably_false``, ``violated``, ...), and
  the hold's.
* **Verdict table** (Table) — every instance's verdict now, whatever the
  suite (the timeline rows are the shipped suite's).
* **Violation events** (Log) — ``/safemanip/log``: each opening and closing,
  each supervisor action.
* **Gate evidence** (Plot) — each limit's observed rate per robot.
* **Diagnostics** (Diagnostics summary) — the stack's ``/diagnostics``.

Pure: no SDK.  test_foxglove.py checks the shipped file is this function's
output for the shipped suite on the demo robot.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

__all__ = ['layout', 'layout_text', 'state_path']


def state_path(instance: str) -> str:
    """The message path of an instance's state on ``/safemanip/verdicts``."""
    return f'/safemanip/verdicts.instances[:]{{instance=="{json.dumps(instance)[1:-1]}"}}.state'


def layout(instances: Sequence[str], world_frame: str = 'world') -> dict[str, Any]:
    """The layout (module docstring) with a timeline row per instance of ``instances``."""
    rows = [{'value': '/safemanip/hold.state', 'timestampMethod': 'receiveTime', 'label': 'supervisor hold'}]
    rows += [{'value': state_path(i), 'timestampMethod': 'receiveTime', 'label': i} for i in instances]
    config = {
        '3D!safemanip': {
            'followTf': world_frame, 'followMode': 'follow-pose',
            'scene': {'transforms': {'showLabel': True, 'axisScale': 0.5}},
            'topics': {'/safemanip/markers': {'visible': True}, '/safemanip/robot': {'visible': True},
                       '/tf': {'visible': True}},
            'layers': {'grid': {'visible': True, 'frameLocked': True, 'label': 'Grid', 'instanceId': 'grid',
                                'layerId': 'foxglove.Grid', 'size': 4, 'divisions': 20}},
            'cameraState': {'distance': 2.5, 'perspective': True, 'phi': 55, 'thetaOffset': 45,
                            'targetOffset': [0, 0, 0], 'target': [0, 0, 0], 'targetOrientation': [0, 0, 0, 1],
                            'fovy': 45, 'near': 0.01, 'far': 1000},
        },
        'StateTransitions!verdicts': {'paths': rows, 'isSynced': True, 'showPoints': True},
        'Table!verdicts': {'topicPath': '/safemanip/verdicts.instances'},
        'RosOut!events': {'searchTerms': [], 'minLogLevel': 1, 'topicToRender': '/safemanip/log'},
        'Plot!gate': {'paths': [{'value': '/safemanip/gate.rate', 'enabled': True, 'timestampMethod': 'receiveTime',
                                 'label': 'observed rate'},
                                {'value': '/safemanip/gate.limit', 'enabled': True, 'timestampMethod': 'receiveTime',
                                 'label': 'limit'}],
                      'showXAxisLabels': True, 'showYAxisLabels': True, 'showLegend': True, 'isSynced': True,
                      'xAxisVal': 'timestamp'},
        'DiagnosticSummary!diagnostics': {'minLevel': 0, 'pinnedIds': [], 'hardwareIdFilter': '',
                                          'topicToRender': '/diagnostics', 'sortByLevel': True},
    }
    arrangement = {
        'direction': 'row', 'splitPercentage': 50,
        'first': {'direction': 'column', 'splitPercentage': 60, 'first': '3D!safemanip',
                  'second': 'RosOut!events'},
        'second': {'direction': 'column', 'splitPercentage': 45, 'first': 'StateTransitions!verdicts',
                   'second': {'direction': 'row', 'splitPercentage': 50,
                              'first': {'direction': 'column', 'first': 'Table!verdicts',
                                        'second': 'DiagnosticSummary!diagnostics', 'splitPercentage': 50},
                              'second': 'Plot!gate'}},
    }
    return {'configById': config, 'globalVariables': {}, 'userNodes': {}, 'playbackConfig': {'speed': 1.0},
            'layout': arrangement}


def layout_text(instances: Sequence[str], world_frame: str = 'world') -> str:
    """:func:`layout` as the file's text."""
    return json.dumps(layout(instances, world_frame), indent=2) + '\n'
