"""The predicates a robot configuration grounds, with their meanings
(``safemanip predicates --config FILE`` and docs/grounding.md)."""

from __future__ import annotations

from .config import RobotConfig

JOINT_MEANINGS = {
    'arm_moving': 'some arm joint moves faster than moving_speed_rad_s',
    'arm_stopped': 'no arm joint moves faster than moving_speed_rad_s',
    'joint_speed_over_limit': 'some arm joint is faster than its velocity limit',
    'joint_near_limit': 'some arm joint is within near_limit_margin_rad of a position limit',
    'gripper_closed': 'every finger opening (calibrated joint position) is below gripper_closed_below_m '
                      '(SafeManip: 0.0399)',
    'gripper_open': 'every finger opening is at or above gripper_open_above_m',
    'gripper_opening': ('the fingers moved outwards by more than gripper_motion_m since the last sample '
                        '(or within gripper_motion_hold_s)'),
    'gripper_closing': ('the fingers moved inwards by more than gripper_motion_m since the last sample '
                        '(or within gripper_motion_hold_s)'),
    'command_divergence': 'an arm joint differs from the commanded position by more than command_divergence_rad',
}


def grounded_predicates(cfg: RobotConfig) -> set[str]:
    """The predicates this configuration's sources can ground: joint states
    and TF always; contacts when contact bodies are configured; the wrench
    predicate when ``wrench_topic`` is set; camera regions and skill events
    when configured."""
    out = set()
    for source, name, _ in predicate_catalog(cfg):
        if source == 'contacts' and not (cfg.contacts.robot_bodies or cfg.contacts.finger_bodies):
            continue
        if source == 'wrench' and not cfg.wrench_topic:
            continue
        out.add(name)
    return out


def predicate_catalog(cfg: RobotConfig) -> list[tuple[str, str, str]]:
    """(source, predicate name, meaning) for every grounded predicate."""
    out = [('joint_states', n, JOINT_MEANINGS[n]) for n in cfg.joints.predicate_names]
    fx = cfg.fixtures
    for f, (joint, closed, opened) in sorted(fx.joints.items()):
        out += [('joint_states', f'fixture_fully_open_{f}', f'{joint} at >= {fx.fully_open_fraction:.0%} of its range '
                 f'({closed} closed .. {opened} open)'),
                ('joint_states', f'fixture_fully_closed_{f}', f'{joint} at <= {fx.fully_closed_fraction:.0%} of its range'),
                ('joint_states', f'fixture_opening_{f}', f'{joint} moved towards open by > {fx.motion_per_sample} per sample'),
                ('joint_states', f'fixture_closing_{f}', f'{joint} moved towards closed by > {fx.motion_per_sample} per sample')]
    out.append(('contacts', 'forbidden_contact', 'a robot or grasped-object contact outside the allowed classes'))
    out.append(('contacts', 'robot_contact_clean', 'the robot touches an entity without the contamination hazard'))
    for o in sorted(cfg.contacts.graspable):
        closure = ' and every finger is closed' if cfg.contacts.require_fingers_closed else ''
        out.append(('contacts', f'object_grasped_raw_{o}', f'at least {cfg.contacts.min_finger_bodies} finger '
                    f'bodies touch {o}{closure}'))
    for o in sorted(cfg.contacts.graspable):
        out.append(('contacts', f'object_left_gripper_{o}', f'no finger body touches {o}'))
    for e in sorted(set(cfg.contacts.body_entity.values())):
        out.append(('contacts', f'robot_contact_{e}', f'the robot touches {e}'))
    for h in sorted({h for hs in cfg.contacts.entity_hazards.values() for h in hs}):
        out.append(('contacts', f'robot_touched_{h}', f'the robot touches an entity with hazard {h}'))
    out.append(('wrench', 'contact_force_over_threshold',
                f'wrench force > {cfg.wrench.force_threshold_n} N or torque > {cfg.wrench.torque_threshold_nm} N m'))
    for name, (a, b, d) in sorted(cfg.tf.near.items()):
        out.append(('tf', f'near_{name}', f'frames {a} and {b} are closer than {d} m'))
    for name, (f, box, lo, hi) in sorted(cfg.tf.inside.items()):
        out.append(('tf', f'inside_{name}', f'origin of {f} inside the box {list(lo)}..{list(hi)} m of {box}'))
    for o in sorted(cfg.tf.objects):
        out += [('tf', f'object_stable_{o}', f'{o} moves slower than {cfg.tf.stable_linear_m_s} m/s and '
                 f'{cfg.tf.stable_angular_rad_s} rad/s (fitted over {cfg.tf.track.window_s:g} s of detections, '
                 f'{cfg.tf.track.position_noise_m * 1000:g} mm noise; while grasped: the gripper\'s motion)'),
                ('tf', f'object_sync_{o}', f'while grasped, {o} slipped less than {cfg.tf.slip_m} m and '
                 f'{cfg.tf.slip_rad} rad relative to the gripper since grasp onset (true when not grasped)'),
                ('tf', f'object_sliding_{o}', f'{o} moves horizontally faster than {cfg.tf.sliding_m_s} m/s'),
                ('tf', f'object_supported_{o}', f'the bottom of {o} is within {cfg.tf.support_gap_m} m of the top '
                 f'of a support other than itself ({", ".join(sorted(cfg.tf.supports)) or "none configured"})'),
                ('tf', f'object_settled_{o}', f'{o} supported, stable, gripper farther than '
                 f'{cfg.tf.gripper_clearance_m} m'),
                ('tf', f'gripper_approaching_{o}', f'the gripper is within {cfg.tf.approach_m} m of {o} and closer '
                 f'than at the previous frame'),
                ('tf', f'preconditions_satisfied_place_{o}', f'a stable support is beneath {o} (its centre over the '
                 f'top face) with at most {cfg.tf.place_max_foreign} other object(s) within {o}\'s footprint + '
                 f'{cfg.tf.place_clear_m} m')]
    for f, (box, lo, hi) in sorted(cfg.tf.interiors.items()):
        out += [('tf', f'reach_in_{f}', f'{cfg.tf.gripper_frame} inside the interior of {f} ({list(lo)}..{list(hi)} m '
                 f'in {box})'),
                ('tf', f'object_reach_in_{f}', f'a grasped object inside the interior of {f}')]
    if cfg.tf.objects and cfg.tf.pick_approach:
        out.append(('tf', 'pick_approach', 'the gripper approaches some graspable object while nothing is grasped'))
    if cfg.tf.objects:
        out.append(('tf', 'preconditions_satisfied_pick', f'the object a running pick skill names (else the one '
                    f'nearest the gripper, not held) is stable and no other object is within {cfg.tf.pick_clear_m} '
                    f'm of it'))
    sk = cfg.skills
    for action in sk.mapped:
        names = ', '.join(sorted(n for n, a in sk.actions.items() if a == action))
        out.append(('skills', f'{action}_approach', f'a {names} skill has started on {sk.topic} and not ended '
                    f'(unknown after {sk.max_active_s:g} s without its end)'))
    for name in sk.target_names:
        out.append(('skills', name, f'a running pick skill names {name.removeprefix("pick_target_")} as its target '
                    f'(the pick precondition is then judged on it)'))
    for name in sorted(cfg.camera.regions):
        out.append(('camera', f'region_occupied_{name}', f'colour region {name} of the image is occupied'))
    return out

