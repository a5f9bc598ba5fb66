"""The QoS profiles of our topics, by role: every node and tool takes its
profile from here, so a publisher and its subscribers always match.

* :data:`RELIABLE` — our own streams between nodes: predicate arrays,
  verdicts, metrics, status, diagnostics, trajectories to the controller.
* :data:`EVENTS` — violation events and supervisor actions, kept for late
  joiners (the recorder, dashboards).  A supervisor subscribes volatile:
  what is open when it starts it asks the monitor (``~/open_violations``),
  not a history that may hold violation episodes long closed, or rollouts
  long ended.
* :data:`STATIC_TF` — ``/tf_static``, transient local as tf2 keeps it.
* :data:`RECORDING` — what the recorder subscribes and the players publish
  (a deeper queue: a burst is recorded, not dropped); :data:`RECORDED_EVENTS`
  — the recorder's subscription to the event topics.
* :data:`SENSOR_INPUTS` — the grounding's robot inputs by default (best
  effort matches every publisher); :data:`RELIABLE_INPUTS` where the
  robot's publishers are reliable (ros2_control's joint_state_broadcaster,
  simulators).  Both keep :data:`INPUT_DEPTH` messages.  :data:`SENSORS`
  (ROS's sensor-data profile, 5 deep) is for images and for what only the
  newest message matters of (the supervisor's joint states).
* :data:`SKILL_EVENTS` — the robot stack's skill START/END events: sparse
  and each one decides an onset, so reliable with a deep queue.
* :data:`ACTION_STATUS` — an action server's ``_action/status`` (rcl_action's
  profile: the newest status list, latched).
"""

from __future__ import annotations

from rclpy.qos import (
    DurabilityPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_action_status_default,
    qos_profile_sensor_data,
)


def reliable(depth: int) -> QoSProfile:
    """Reliable, volatile, keeping the last ``depth`` messages."""
    return QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE)


def latched(depth: int) -> QoSProfile:
    """Reliable and transient local: a late subscriber gets the last ``depth`` messages."""
    return QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)


RELIABLE = reliable(50)
EVENTS = latched(100)
FINAL_METRICS = latched(100)
"""A rollout's final metrics (``metrics/final``): a gate that comes up late still counts the last 100."""
STATIC_TF = latched(100)
RECORDING = reliable(100)
RECORDED_EVENTS = latched(5000)
"""A frame can open or close one violation per instance (the soak's close up to 250 at once, faster than
the recorder takes them): with the events' depth of 100, a burst lost some before it was recorded."""
SENSORS = qos_profile_sensor_data
INPUT_DEPTH = 100
"""Inputs a grounding keeps while its executor is busy: a frame a late tick
catches up on is grounded from the inputs of its time (a second of them at
100 Hz, the supervisor's default stall limit).  With the sensor-data
profile's 5, a 0.45 s stall of a 20 Hz robot lost four inputs a time and the
frames caught up on called the sensor stale."""
SENSOR_INPUTS = QoSProfile(depth=INPUT_DEPTH, reliability=ReliabilityPolicy.BEST_EFFORT)
RELIABLE_INPUTS = reliable(INPUT_DEPTH)
SKILL_EVENTS = reliable(100)
ACTION_STATUS = qos_profile_action_status_default
