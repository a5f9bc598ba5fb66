"""Write ``config/security/policy.xml``: the SROS2 access-control policy of
the stack (``ros2 security generate_artifacts -p config/security/policy.xml``
turns it into each enclave's signed permissions).

One source, checked by ``test/test_security_policy.py`` against the topics
and services the running stack really uses.  What it restricts:

* only the supervisor publishes hold commands (the controller topic) and
  ``supervisor_actions``;
* only the operator enclave (``safemanip ack`` / ``resume``, an operator's
  console, a Foxglove server with operator actions) may call the supervisor's ``acknowledge`` / ``acknowledge_stop``
  and the monitor's ``reload`` / ``start_episode`` / ``end_episode``, and
  the lifecycle ``change_state`` services;
* every node may use exactly the topics and services of its role, and the
  ROS 2 plumbing every node has (rosout, parameters, type descriptions).

    python tools/security_policy.py            # rewrite config/security/policy.xml
    python tools/security_policy.py --check    # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
POLICY = REPO / 'config' / 'security' / 'policy.xml'
CONTROLLER = 'joint_trajectory_controller/joint_trajectory'
PREDICATES = ['predicates', 'predicates/joint_states', 'predicates/contacts', 'predicates/tf', 'predicates/camera',
              'predicates/skills']
# The robot controllers' interfaces a hold may go through, at their usual names (safemanip run
# --trajectory-action, --servo-pause-service, --hold-controller).
TRAJECTORY_ACTION = 'joint_trajectory_controller/follow_joint_trajectory'
CONTROLLER_REQUESTS = [f'{TRAJECTORY_ACTION}/_action/cancel_goal', 'servo_node/pause_servo',
                       'controller_manager/switch_controller']
LIFECYCLE_SERVICES = ['~/get_state', '~/get_available_states', '~/get_available_transitions', '~/get_transition_graph']
PARAMETER_SERVICES = ['~/describe_parameters', '~/get_parameter_types', '~/get_parameters', '~/list_parameters',
                      '~/set_parameters', '~/set_parameters_atomically', '~/get_type_description']
OPERATOR_CALLS = ['supervisor/acknowledge', 'supervisor/acknowledge_stop', 'monitor/reload', 'monitor/start_episode',
                  'monitor/end_episode', 'monitor/change_state', 'supervisor/change_state', 'recorder/change_state']

FOXGLOVE_VIEW = {'publish': ['/diagnostics'],
                 'subscribe': ['verdicts', 'violations', 'supervisor_actions', 'gate/decisions', '/tf', '/tf_static',
                               '/diagnostics']}
FOXGLOVE_CALLS = ['supervisor/acknowledge', 'supervisor/acknowledge_stop', 'monitor/start_episode',
                  'monitor/end_episode']

# profile (a node's name, or a key of PROFILE_NODE) → what it may do: publish, subscribe, reply (serve),
# request (call).
NODES: dict[str, dict[str, list[str]]] = {
    'joint_state_grounding': {'publish': ['predicates/joint_states', '/diagnostics'], 'subscribe': ['joint_states']},
    'contact_grounding': {'publish': ['predicates/contacts', '/diagnostics'], 'subscribe': ['contacts', 'wrench']},
    'tf_grounding': {'publish': ['predicates/tf', '/diagnostics'],
                     'subscribe': ['/tf', '/tf_static', 'predicates/contacts', 'predicates/skills']},
    'skill_grounding': {'publish': ['predicates/skills', '/diagnostics'], 'subscribe': ['skill_events']},
    # Marker and object poses go on /tf (world → object; markers: camera frame → marker's frame).
    'camera_grounding': {'publish': ['predicates/camera', '/diagnostics', '/tf'],
                         'subscribe': ['image', 'depth', 'camera_info', '/tf', '/tf_static', 'predicates/contacts']},
    'monitor': {'publish': ['verdicts', 'violations', 'metrics', 'metrics/final', 'status', '/diagnostics',
                            '~/transition_event'],
                'subscribe': PREDICATES,
                'reply': ['~/start_episode', '~/end_episode', '~/reload', '~/status', '~/open_violations',
                          '~/change_state', *LIFECYCLE_SERVICES]},
    'supervisor': {'publish': [CONTROLLER, 'supervisor_actions', '/diagnostics', '~/transition_event'],
                   'subscribe': ['violations', 'joint_states', 'status', *PREDICATES,
                                 f'{TRAJECTORY_ACTION}/_action/status'],
                   'reply': ['~/acknowledge', '~/acknowledge_stop', '~/change_state', *LIFECYCLE_SERVICES],
                   # the controller's own pause/resume/stop services, where the policy file names them
                   # and the monitor's open violations, asked on activation
                   'request': ['controller/pause', 'controller/resume', 'controller/stop', 'monitor/open_violations',
                               *CONTROLLER_REQUESTS]},
    'recorder': {'publish': ['~/transition_event'],
                 'subscribe': [*PREDICATES, 'verdicts', 'violations', 'metrics', 'status', 'supervisor_actions',
                               'joint_states', 'contacts', '/tf', '/tf_static', 'skill_events'],
                 'reply': ['~/change_state', *LIFECYCLE_SERVICES]},
    'gate': {'publish': ['gate/decisions', '/diagnostics'], 'subscribe': ['metrics/final', '/*/metrics/final']},
    'operator': {'subscribe': ['supervisor_actions', 'violations', 'status', 'gate/decisions'],
                 'request': OPERATOR_CALLS},
    # The Foxglove server: what it shows; read-only beside the stack or the gate, in their process.
    'foxglove': FOXGLOVE_VIEW,
    # The Foxglove server with operator actions (--operator-credential) acts for the operator: a process of
    # its own in the operator's enclave, so a stack's enclave never holds an operator call.
    'foxglove_operator': {**FOXGLOVE_VIEW, 'request': FOXGLOVE_CALLS},
}
PROFILE_NODE = {'foxglove_operator': 'foxglove'}
"""A profile whose node name is not its key (one node, two roles by enclave)."""
# enclave → the nodes whose profiles it holds (an enclave is a process).
ENCLAVES: dict[str, list[str]] = {
    '/safemanip/stack': ['joint_state_grounding', 'contact_grounding', 'tf_grounding', 'camera_grounding',
                         'skill_grounding', 'monitor', 'supervisor', 'recorder', 'foxglove'],  # safemanip run
    **{f'/safemanip/{n}': [n] for n in ('joint_state_grounding', 'contact_grounding', 'tf_grounding',
                                        'camera_grounding', 'skill_grounding', 'monitor', 'supervisor',
                                        'recorder')},  # launch
    '/safemanip/gate': ['gate', 'foxglove'],
    '/safemanip/foxglove': ['foxglove'],                       # ros2 run safemanip_ros foxglove: read-only
    '/safemanip/operator': ['operator', 'foxglove_operator'],
}


def policy_xml() -> str:
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<!-- Generated by tools/security_policy.py: edit that, not this. -->',
           '<policy version="0.2.0">', '  <enclaves>']
    for enclave, nodes in ENCLAVES.items():
        out += [f'    <enclave path="{enclave}">', '      <profiles>']
        for node in nodes:
            rules = NODES[node]
            out.append(f'        <profile ns="/" node="{PROFILE_NODE.get(node, node)}">')
            topics_pub = ['rosout', 'parameter_events', *rules.get('publish', [])]
            topics_sub = ['parameter_events', *rules.get('subscribe', [])]
            out += _group('topics', 'publish', topics_pub) + _group('topics', 'subscribe', topics_sub)
            out += _group('services', 'reply', [*PARAMETER_SERVICES, *rules.get('reply', [])])
            out += _group('services', 'request', rules.get('request', []))
            out.append('        </profile>')
        out += ['      </profiles>', '    </enclave>']
    out += ['  </enclaves>', '</policy>', '']
    return '\n'.join(out)


def _group(kind: str, verb: str, names: list[str]) -> list[str]:
    if not names:
        return []
    tag = kind[:-1]
    return ([f'          <{kind} {verb}="ALLOW">'] + [f'            <{tag}>{n}</{tag}>' for n in dict.fromkeys(names)]
            + [f'          </{kind}>'])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--check', action='store_true', help='exit 1 if config/security/policy.xml is out of date')
    args = ap.parse_args()
    text = policy_xml()
    if args.check:
        if not POLICY.exists() or POLICY.read_text() != text:
            print(f'{POLICY.relative_to(REPO)} is out of date: run python tools/security_policy.py', file=sys.stderr)
            return 1
        return 0
    POLICY.parent.mkdir(parents=True, exist_ok=True)
    POLICY.write_text(text)
    print(f'wrote {POLICY.relative_to(REPO)}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
