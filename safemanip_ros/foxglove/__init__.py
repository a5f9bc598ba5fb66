"""The monitor in Foxglove: a Foxglove WebSocket server (and MCAP file)
carrying verdict timelines, violation events, holds, the gate's evidence,
TF and 3D markers on the objects a violation names.

* :mod:`.scene` — what is shown, as Foxglove's JSON messages (pure);
* :mod:`.operator` — the operator credential, per connection (pure);
* :mod:`.robot` — the arm and its scene drawn from TF (pure);
* :mod:`.tf_relay` — TF as each link's newest pose, decoded by layout;
* :mod:`.view` — the stack's serialized messages to what Foxglove is sent:
  one path live, from a recording and from an audit;
* :mod:`.server` — the Foxglove SDK's server, fed from a bounded queue on
  its own thread;
* :mod:`.recording` and :mod:`.audited` — MCAP files of a recording of the
  stack and of an audit's verdicts;
* :mod:`.layout` — the shipped layout.

The ROS side is :mod:`safemanip_ros.nodes.foxglove_node`; the shipped
layout is ``config/foxglove/safemanip.json``.
"""

from .operator import OperatorAccess, load_credential
from .scene import ViolationScene, verdicts_json

__all__ = ['OperatorAccess', 'ViolationScene', 'load_credential', 'verdicts_json']
