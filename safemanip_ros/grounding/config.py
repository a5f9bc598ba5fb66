"""Robot/scene grounding configuration (``config/robots/*.yaml``).

One file says, for one robot in one scene: its joints and limits, which
simulator bodies are the robot and its fingers, the entities present (their
ontology type, bodies, TF frame, allowed grasp targets, support extents),
geometric relations to watch, the camera's markers and colour regions, and
the thresholds and staleness limits (SafeManip's defaults where they apply).
:func:`load_robot_config` validates it (errors name file, line and field)
and builds each grounding source's configuration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SpecError
from ..resources import config_dir
from ..spec.fields import Field, validate
from ..spec.ontology import Ontology, Scene, layered_ontology_files, load_ontology, scene_from_mapping
from ..spec.yamlio import Located, load_yaml
from .camera import CameraConfig, ColourRegion
from .colour_depth import ObjectLook
from .contacts import ContactConfig, WrenchConfig
from .geometry import Shape, SupportSurface
from .joints import FixtureConfig, GripperCalibration, JointConfig
from .skills import ACTIONS, SkillConfig
from .tf import TfConfig
from .tracking import TrackConfig

CONFIG_DIR = config_dir()

def _named(value: str) -> str | None:
    return None if value.strip() else 'must name a frame (it is empty)'


def _nonempty(value: str) -> str | None:
    return None if value.strip() else 'must be a name (it is empty)'


def _positive(value: float) -> str | None:
    return None if value > 0 else f'must be > 0, got {value}'


def _is_name(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _box_problem(lo: object, hi: object) -> str | None:
    """What is wrong with an axis-aligned box given as its two corners, or None."""
    if not (isinstance(lo, list) and isinstance(hi, list) and len(lo) == 3 and len(hi) == 3
            and all(map(_is_number, lo + hi))):
        return 'its corners must be [xmin, ymin, zmin] and [xmax, ymax, zmax], finite numbers'
    if not all(a < b for a, b in zip(lo, hi)):
        return f'its minimum corner {lo} must lie below its maximum {hi} on every axis'
    return None


def _near_problem(spec: list[object]) -> str | None:
    if len(spec) != 3 or not (_is_name(spec[0]) and _is_name(spec[1]) and _is_number(spec[2])):
        return f'expected [frame_a, frame_b, distance_m], got {spec}'
    return None if spec[2] > 0 else f'its distance must be > 0 m, got {spec[2]}'  # type: ignore[operator]


def _inside_problem(spec: list[object]) -> str | None:
    if len(spec) != 4 or not (_is_name(spec[0]) and _is_name(spec[1])):
        return f'expected [frame, box_frame, [xmin, ymin, zmin], [xmax, ymax, zmax]], got {spec}'
    return _box_problem(spec[2], spec[3])


def _interior_problem(spec: list[object]) -> str | None:
    if len(spec) != 3 or not _is_name(spec[0]):
        return f'expected [frame, [xmin, ymin, zmin], [xmax, ymax, zmax]] (metres in that frame), got {spec}'
    return _box_problem(spec[1], spec[2])


# OpenCV's 8-bit HSV: hue 0..179, saturation and value 0..255 (cv2.inRange does not wrap hue).
_HSV_MAX = (179, 255, 255)


def _hsv_problem(low: list[int], high: list[int], hue_wraps: bool) -> str | None:
    """What is wrong with an OpenCV HSV range (None: nothing); ``hue_wraps``: a low hue above the high one
    is a range through red, else an error like any channel out of order."""
    if len(low) != 3 or len(high) != 3:
        return 'hsv_low/hsv_high are [h, s, v]'
    for name, hsv in (('hsv_low', low), ('hsv_high', high)):
        if not all(0 <= v <= top for v, top in zip(hsv, _HSV_MAX)):
            return f'{name} {hsv} is outside OpenCV\'s HSV range (h 0..179, s and v 0..255)'
    if hue_wraps and not (low[1] <= high[1] and low[2] <= high[2]):
        return f'hsv_low {low} must not exceed hsv_high {high} in saturation or value (a low hue above the ' \
               f'high one wraps through red)'
    if not hue_wraps and not all(a <= b for a, b in zip(low, high)):
        return f'hsv_low {low} must not exceed hsv_high {high} in any channel (no hue wrap-around)'
    return None


def _region_problem(region: dict[str, list[int]]) -> str | None:
    rect = region['rect_px']
    if len(rect) != 4:
        return 'rect_px is [x0, y0, x1, y1], hsv_low/hsv_high are [h, s, v]'
    x0, y0, x1, y1 = rect
    if not (0 <= x0 < x1 and 0 <= y0 < y1):
        return f'rect_px {rect} must have 0 <= x0 < x1 and 0 <= y0 < y1 (pixels)'
    hsv = _hsv_problem(region['hsv_low'], region['hsv_high'], hue_wraps=False)
    if hsv is not None:
        return hsv
    fraction = region.get('min_fraction', 0.2)
    if not 0 < fraction <= 1:  # type: ignore[operator]
        return f'min_fraction {fraction} must be a share of the region, 0 < x <= 1'
    return None


def _look_problem(look: dict[str, Any]) -> str | None:
    return _hsv_problem(look['hsv_low'], look['hsv_high'], hue_wraps=True)


_NAME = Field('str', check=_nonempty)


def _topic(name: str) -> str | None:
    """What rcl would refuse in a configured topic name ('': none configured, or the default)."""
    from ..ros_names import optional_topic_problem
    return 'empty (leave it out for the default)' if name and not name.strip() else optional_topic_problem(name)


_TOPIC = Field('str', check=_topic)
_STR_LIST = Field('list', items=_NAME)
_NUM_LIST = Field('list', items=Field('float'))
_POSITIVE = Field('float', check=_positive)
_POSITIVE_LIST = Field('list', items=_POSITIVE)
ROBOT_SCHEMA = Field('map', keys={
    'robot': Field('str', required=True),
    'description': Field('str'),
    'rate_hz': Field('float', minimum=1e-3),
    'ontology': _STR_LIST,
    'world_frame': Field('str', required=True, check=_named),
    'gripper_frame': Field('str', required=True, check=_named),
    'camera_frame': Field('str'),
    'wrench_topic': _TOPIC,
    'staleness_s': Field('map', keys={k: Field('float', minimum=0.0) for k in
                                      ('joint_states', 'contacts', 'wrench', 'tf', 'camera')}),
    'joints': Field('map', required=True, keys={
        'arm': Field('list', required=True, items=Field('str')),
        'gripper': _STR_LIST,
        'gripper_calibration': Field('dict', values=Field('map', keys={
            'sign': Field('float'), 'offset': Field('float'), 'scale': Field('float', minimum=1e-9),
            'closed': Field('float'), 'open': Field('float')})),
        'position_limits_rad': Field('dict', values=_NUM_LIST),
        'velocity_limits_rad_s': Field('dict', values=_POSITIVE),
        'command_topic': _TOPIC,
    }),
    # Thresholds are speeds, margins, distances and forces: none is negative.
    'thresholds': Field('map', keys={k: Field('float', minimum=0.0) for k in (
        'moving_speed_rad_s', 'near_limit_margin_rad', 'gripper_closed_below_m', 'gripper_open_above_m',
        'gripper_motion_m', 'command_divergence_rad', 'contact_min_force_n', 'stable_linear_m_s',
        'stable_angular_rad_s', 'sliding_m_s', 'slip_m', 'slip_rad', 'support_gap_m', 'gripper_clearance_m',
        'force_threshold_n', 'torque_threshold_nm', 'pick_clear_m', 'place_clear_m')} | {'gripper_motion_hold_s': Field('float', minimum=0.0)}),
    'contacts': Field('map', keys={
        'robot_bodies': _STR_LIST, 'finger_bodies': _STR_LIST, 'min_finger_bodies': Field('int', minimum=1),
        'target_fixtures': _STR_LIST}),
    'entities': Field('dict', required=True, values=Field('map', keys={
        'type': Field('str', required=True), 'bodies': _STR_LIST, 'frame': Field('str', check=_named),
        'grasp_targets': _STR_LIST, 'support_half_extents_m': _POSITIVE_LIST,
        'shape': Field('map', keys={'box': _POSITIVE_LIST, 'cylinder': _POSITIVE_LIST, 'sphere': _POSITIVE}),
        'top_offset_m': Field('float'), 'roles': _STR_LIST})),
    'fixtures': Field('dict', values=Field('map', keys={
        'joint': Field('str', required=True, check=_nonempty), 'closed': Field('float', required=True),
        'open': Field('float', required=True), 'interior': Field('list', check=_interior_problem)})),
    # How object poses are read when a detector gives them (grounding/tracking.py).
    'perception': Field('map', keys={k: Field('float', minimum=0.0) for k in (
        'position_noise_m', 'orientation_noise_rad', 'correlation_s')} | {k: Field('float', minimum=1e-3) for k in (
        'window_s', 'staleness_s', 'support_staleness_s')}),
    'tf': Field('map', keys={'near': Field('dict', values=Field('list', check=_near_problem)),
                             'inside': Field('dict', values=Field('list', check=_inside_problem))}),
    'camera': Field('map', keys={
        'dictionary': Field('str'), 'marker_size_m': Field('float', minimum=1e-4),
        'markers': Field('dict', values=Field('str')),
        'regions': Field('dict', values=Field('map', check=_region_problem, keys={
            'rect_px': Field('list', required=True, items=Field('int')),
            'hsv_low': Field('list', required=True, items=Field('int')),
            'hsv_high': Field('list', required=True, items=Field('int')),
            'min_fraction': Field('float')})),
        # Objects found by colour and depth in the camera's RGB-D pair (grounding/colour_depth.py).
        'objects': Field('dict', values=Field('map', check=_look_problem, keys={
            'hsv_low': Field('list', required=True, items=Field('int')),
            'hsv_high': Field('list', required=True, items=Field('int')),
            'centre_behind_m': Field('float', minimum=0.0)}))}),
    # The robot stack's skill events (grounding/skills.py): its skill names → SafeManip's actions.
    'skills': Field('map', keys={
        'topic': _TOPIC, 'actions': Field('dict', values=Field('str')),
        'max_active_s': Field('float', minimum=1e-3), 'unknown_after_reset_s': Field('float', minimum=0.0)}),
})


@dataclass
class RobotConfig:
    name: str
    source: str
    rate_hz: float
    ontology: Ontology
    scene: Scene
    joints: JointConfig
    contacts: ContactConfig
    wrench: WrenchConfig
    tf: TfConfig
    camera: CameraConfig
    fixtures: FixtureConfig = field(default_factory=FixtureConfig)
    camera_frame: str = 'camera_optical_frame'
    marker_dictionary: str = 'DICT_4X4_50'
    marker_size_m: float = 0.05
    markers: dict[int, str] = field(default_factory=dict)   # marker id → entity frame
    command_topic: str = ''
    wrench_topic: str = ''          # a geometry_msgs/WrenchStamped topic (F/T sensor), if any
    skills: SkillConfig = field(default_factory=SkillConfig)


def load_robot_config(path: str | Path) -> RobotConfig:
    doc = load_yaml(path)
    validate(doc, ROBOT_SCHEMA, f'{path}:1', '')
    base = Path(path).parent
    onto = load_ontology(layered_ontology_files(
        [(base / p) if not Path(p).is_absolute() else Path(p) for p in doc.get('ontology', [])]))
    ents = doc['entities']
    scene = scene_from_mapping(ents, onto, str(path))
    th = doc.get('thresholds') or {}
    st = doc.get('staleness_s') or {}
    j = doc['joints']
    limits = {}
    for name, pair in (j.get('position_limits_rad') or {}).items():
        if len(pair) != 2 or pair[0] >= pair[1]:
            raise SpecError(f'{j["position_limits_rad"].where(name)}: joints.position_limits_rad.{name}: '
                            f'expected [lower, upper] with lower < upper, got {list(pair)}')
        limits[name] = (float(pair[0]), float(pair[1]))
    for name in list(limits) + list(j.get('velocity_limits_rad_s') or {}):
        if name not in j['arm']:
            raise SpecError(f'{j.where()}: joints: limit given for {name!r}, which is not an arm joint '
                            f'({", ".join(j["arm"])})')
    both = sorted(set(j['arm']) & set(j.get('gripper') or []))
    if both:
        raise SpecError(f'{j.where()}: joints: {both} are in both arm and gripper; a joint is one or the other')
    calibration = _gripper_calibration(j)
    joints = JointConfig(
        list(j['arm']), list(j.get('gripper') or []), limits, dict(j.get('velocity_limits_rad_s') or {}),
        moving_speed_rad_s=th.get('moving_speed_rad_s', 0.02), near_limit_margin_rad=th.get('near_limit_margin_rad', 0.05),
        gripper_closed_below_m=th.get('gripper_closed_below_m', 0.0399),
        gripper_open_above_m=th.get('gripper_open_above_m', 0.039), gripper_motion_m=th.get('gripper_motion_m', 1e-3),
        gripper_motion_hold_s=th.get('gripper_motion_hold_s', 0.0),
        command_divergence_rad=th.get('command_divergence_rad', 0.1), has_command=bool(j.get('command_topic')),
        staleness_s=st.get('joint_states', 0.2), gripper_calibration=calibration)
    c = doc.get('contacts') or Located()
    body_entity: dict[str, str] = {}
    for e, spec in ents.items():
        for body in spec.get('bodies') or []:
            if body in body_entity:
                raise SpecError(f'{ents.where(e)}: entities.{e}.bodies: body {body!r} already belongs to '
                                f'{body_entity[body]!r}')
            body_entity[body] = e
    fingers = c.get('finger_bodies') or []
    if fingers and int(c.get('min_finger_bodies', 2)) > len(fingers):
        raise SpecError(f'{c.where("min_finger_bodies")}: contacts.min_finger_bodies: {c.get("min_finger_bodies", 2)} '
                        f'exceeds the {len(fingers)} finger bodies configured ({", ".join(fingers)}): no grasp '
                        f'could ever be seen')
    targets = set(c.get('target_fixtures') or [])
    unknown_targets = targets - set(ents)
    if unknown_targets:
        raise SpecError(f'{c.where("target_fixtures")}: contacts.target_fixtures: {sorted(unknown_targets)} are not '
                        f'entities ({", ".join(ents)})')
    contacts = ContactConfig(
        set(c.get('robot_bodies') or []), set(c.get('finger_bodies') or []), body_entity,
        movable=set(scene.select(onto, {'role': 'movable_object'})),
        graspable=set(scene.select(onto, {'affordance': 'graspable'})), target_fixtures=targets,
        # Where the scene says objects are meant to go (targets, receivers), placing may touch.
        grasp_targets={e: set(spec.get('grasp_targets') or []) | set(scene.select(onto, {'role': ['target', 'receiver']}))
                       for e, spec in ents.items()},
        entity_hazards={e: {h for h in _closure(onto, 'hazard', onto.types[t]['hazard'])}
                        for e, t in scene.entities.items()},
        min_finger_bodies=int(c.get('min_finger_bodies', 2)), min_force_n=th.get('contact_min_force_n', 0.0),
        staleness_s=st.get('contacts', 0.2), require_fingers_closed=bool(joints.gripper_joints))
    wrench = WrenchConfig(th.get('force_threshold_n', 10.0), th.get('torque_threshold_nm', 2.0), st.get('wrench', 0.1))
    tf_doc = doc.get('tf') or {}
    near = {}
    for name, spec in (tf_doc.get('near') or {}).items():      # shapes checked by the schema (_near_problem)
        near[name] = (str(spec[0]), str(spec[1]), float(spec[2]))
    inside = {}
    for name, spec in (tf_doc.get('inside') or {}).items():    # (_inside_problem)
        inside[name] = (str(spec[0]), str(spec[1]), tuple(spec[2]), tuple(spec[3]))
    interiors: dict[str, tuple[str, tuple[float, float, float], tuple[float, float, float]]] = {}
    for name, spec in (doc.get('fixtures') or {}).items():
        box = spec.get('interior')
        if box is None:
            continue
        lo_x, lo_y, lo_z = (float(v) for v in box[1])
        hi_x, hi_y, hi_z = (float(v) for v in box[2])
        interiors[name] = (str(box[0]), (lo_x, lo_y, lo_z), (hi_x, hi_y, hi_z))
    shapes = {e: _shape(ents, e) for e in ents}
    # A support: declared (support_half_extents_m), given the scene role, or of a type whose role is a
    # support surface and whose shape says where its top is.
    surfaces = set(scene.select(onto, {'role': 'support_surface'}))
    supports = {e: _support(ents, e, shapes[e]) for e, spec in ents.items()
                if 'support_half_extents_m' in spec or (e in surfaces and shapes[e].kind != 'point')
                or 'support' in (spec.get('roles') or [])}
    objects = {e: ents[e].get('frame', e) for e in sorted(contacts.graspable)}
    skills = _skills(doc, sorted(objects))
    # The thresholds given; the others keep TfConfig's defaults (declared there once).
    given_tf = {k: th[k] for k in ('stable_linear_m_s', 'stable_angular_rad_s', 'sliding_m_s', 'slip_m', 'slip_rad',
                                   'support_gap_m', 'gripper_clearance_m', 'pick_clear_m', 'place_clear_m') if k in th}
    if 'tf' in st:
        given_tf['staleness_s'] = st['tf']
    tf = TfConfig(doc['world_frame'], doc['gripper_frame'], objects, supports, near, inside,
                  shapes={e: shapes[e] for e in objects}, support_shapes={e: shapes[e] for e in supports},
                  interiors=interiors, **given_tf,
                  track=TrackConfig(**(doc.get('perception') or {})),
                  # Where the stack says when a pick starts, the geometric approach test steps aside.
                  pick_approach='pick' not in skills.mapped)
    cam = doc.get('camera') or {}
    regions = {}
    for name, r in (cam.get('regions') or {}).items():        # (_region_problem)
        x0, y0, x1, y1 = r['rect_px']
        regions[name] = ColourRegion(x0, y0, x1, y1, tuple(r['hsv_low']), tuple(r['hsv_high']),
                                     float(r.get('min_fraction', 0.2)))
    looks = []
    for ent, look in (cam.get('objects') or {}).items():          # (_look_problem)
        if ent not in ents:
            raise SpecError(f'{cam["objects"].where(ent)}: camera.objects.{ent}: not an entity ({", ".join(ents)})')
        behind = look.get('centre_behind_m')
        if behind is None:      # default: the shape's smallest half extent (a box seen face on; a radius)
            dims = shapes[ent].dims_m
            behind = min(dims) if dims else 0.0
        looks.append(ObjectLook(ents[ent].get('frame', ent), tuple(look['hsv_low']), tuple(look['hsv_high']),
                                float(behind)))
    markers = {}
    for key, ent in (cam.get('markers') or {}).items():
        if not str(key).isdigit() or ent not in ents:
            raise SpecError(f'{cam["markers"].where(key)}: camera.markers.{key}: expected marker id -> entity '
                            f'({", ".join(ents)})')
        markers[int(key)] = ents[ent].get('frame', ent)
    fixtures = {}
    for name, spec in (doc.get('fixtures') or {}).items():
        if name not in ents:
            raise SpecError(f'{doc["fixtures"].where(name)}: fixtures.{name}: not an entity ({", ".join(ents)})')
        if spec['open'] == spec['closed']:
            raise SpecError(f'{doc["fixtures"].where(name)}: fixtures.{name}: open and closed positions are equal')
        fixtures[name] = (spec['joint'], float(spec['closed']), float(spec['open']))
    return RobotConfig(doc['robot'], str(path), float(doc.get('rate_hz', 20.0)), onto, scene, joints, contacts,
                       wrench, tf, CameraConfig(regions, st.get('camera', 0.5), looks),
                       fixtures=FixtureConfig(fixtures, staleness_s=st.get('joint_states', 0.2)),
                       camera_frame=doc.get('camera_frame', 'camera_optical_frame'),
                       marker_dictionary=cam.get('dictionary', 'DICT_4X4_50'),
                       marker_size_m=float(cam.get('marker_size_m', 0.05)), markers=markers,
                       command_topic=j.get('command_topic', ''), wrench_topic=doc.get('wrench_topic', ''),
                       skills=skills)


def _skills(doc: Located, objects: list[str]) -> SkillConfig:
    spec = doc.get('skills')
    if not spec:
        return SkillConfig()
    actions = dict(spec.get('actions') or {})
    for name, action in actions.items():
        if action not in ACTIONS:
            raise SpecError(f'{spec["actions"].where(name)}: skills.actions.{name}: {action!r} is not a SafeManip '
                            f'action ({", ".join(ACTIONS)})')
    if not actions:
        raise SpecError(f'{spec.where()}: skills: no actions: map the stack\'s skill names to SafeManip actions '
                        f'({", ".join(ACTIONS)})')
    topic = str(spec.get('topic', '/skill_events'))
    if not topic.strip():
        raise SpecError(f'{spec.where("topic")}: skills.topic: empty (leave it out for /skill_events)')
    return SkillConfig(topic, actions, float(spec.get('max_active_s', 120.0)),
                       float(spec.get('unknown_after_reset_s', 1.0)), objects)


def _gripper_calibration(j: Located) -> dict[str, GripperCalibration]:
    out = {}
    for name, spec in (j.get('gripper_calibration') or {}).items():
        where = f'{j["gripper_calibration"].where(name)}: joints.gripper_calibration.{name}'
        if name not in (j.get('gripper') or []):
            raise SpecError(f'{where}: not a gripper joint ({", ".join(j.get("gripper") or []) or "none listed"})')
        ranged = 'closed' in spec or 'open' in spec
        if ranged and not ('closed' in spec and 'open' in spec):
            raise SpecError(f'{where}: give both closed and open positions, or sign/offset/scale')
        if ranged and any(k in spec for k in ('sign', 'offset', 'scale')):
            raise SpecError(f'{where}: give either closed/open or sign/offset/scale, not both')
        if ranged:
            if spec['closed'] == spec['open']:
                raise SpecError(f'{where}: closed and open positions are equal')
            out[name] = GripperCalibration.from_range(float(spec['closed']), float(spec['open']))
        else:
            sign = float(spec.get('sign', 1.0))
            if sign not in (1.0, -1.0):
                raise SpecError(f'{where}.sign: expected 1 or -1, got {sign}')
            out[name] = GripperCalibration(sign, float(spec.get('offset', 0.0)), float(spec.get('scale', 1.0)))
    return out


def _shape(ents: Located, e: str) -> Shape:
    spec = ents[e].get('shape')
    if not spec:
        return Shape()
    if len(spec) != 1:
        raise SpecError(f'{ents[e].where("shape")}: entities.{e}.shape: give exactly one of box, cylinder, sphere')
    (kind, dims), = spec.items()
    dims = (dims,) if kind == 'sphere' else tuple(dims)
    try:
        return Shape(kind, tuple(float(d) for d in dims))
    except ValueError as exc:
        raise SpecError(f'{ents[e].where("shape")}: entities.{e}.shape: {exc} '
                        f'(box: [half_x, half_y, half_z], cylinder: [radius, half_height], sphere: radius)') from None


def _support(ents: Located, e: str, shape: Shape) -> SupportSurface:
    """The top face of a support: ``support_half_extents_m`` (legacy: its
    frame is the top face's centre) or the shape's top face; the face's
    height above the frame is ``top_offset_m``, else the shape's half-height."""
    spec = ents[e]
    if 'support_half_extents_m' in spec:
        half = spec['support_half_extents_m']
        if len(half) < 2:
            raise SpecError(f'{spec.where("support_half_extents_m")}: entities.{e}.support_half_extents_m: '
                            f'expected [half_x, half_y]')
        hx, hy = float(half[0]), float(half[1])
    elif shape.kind != 'point':
        hx, hy = shape.footprint_m()
    else:
        raise SpecError(f'{spec.where()}: entities.{e}: a support needs a shape or support_half_extents_m')
    top = float(spec['top_offset_m']) if 'top_offset_m' in spec else shape.half_extent_z()
    return SupportSurface(spec.get('frame', e), hx, hy, top)


def _closure(onto: Ontology, dimension: str, values: set[str]) -> set[str]:
    out: set[str] = set()
    for v in values:
        out |= onto.ancestors(dimension, v)
    return out
