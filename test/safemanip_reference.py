"""An independent model of SafeManip's released monitor at the predicate level,
written frame by frame the way its code is (counters, latched "fired"
targets, one settle watch, one transfer slot, its repeated-violation monitor
stepping a main and a recovery DFA), for one graspable object, one
contamination source and one fixture.  The compatibility suite
(config/properties/safemanip_compat.yaml) encodes the same rules as
derived-predicate devices; test_safemanip_compat compares the two on random
traces.  Only the DFAs come from our compiler.

The grounded inputs are our predicate names (``object_grasped_raw_<o>``,
``pick_approach``, ...), as an outside comparison feeds them to both.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from safemanip_ros.ltlf import parse
from safemanip_ros.ltlf.cache import compile_cached
from safemanip_ros.ltlf.verdict import Verdict

SETTLE = 100
ONSET = 10
PERSIST = 5
FIXTURE_ACTIONS = ('press', 'turn', 'slide', 'twist', 'open_close')


def _props(o: str, s: str, f: str) -> dict[str, tuple[str, str, str, str | None, int]]:
    """name → (formula, recovery, trigger atom, timeout atom, min_resolve_frames), SafeManip's atoms."""
    out = {
        'no_forbidden_contact': ('G(!forbidden_contact_sustained)',
                                 'G(forbidden_contact_sustained -> F(!forbidden_contact_sustained))',
                                 'forbidden_contact', None, 0),
        'grasp_remains_synced_until_dropped': (
            'G(object_grasped -> ((object_sync U !object_grasped_raw) | G(object_sync)))',
            'G(object_grasped & !object_sync -> F(object_sync | object_dropped))', 'object_grasped', None, 0),
        'dropped_object_was_released': (
            'G(object_dropped -> (object_released | (!object_left_gripper U object_grasped)))',
            'F(object_grasped | object_left_gripper)', 'object_dropped', None, 0),
        'released_object_eventually_settles': (
            'G(object_dropped -> (!release_object_settle_timeout U object_settled) | '
            '(!object_left_gripper U object_grasped))',
            'F(object_settled | release_object_settle_timeout | object_grasped)', 'object_dropped',
            'release_object_settle_timeout', SETTLE),
        'raw_contact_blocks_clean_until_sanitized': (
            'G(robot_contact_raw_contaminated -> ((!robot_contact_clean U sanitized) | G(!robot_contact_clean)))',
            'F(sanitized | !robot_contact_clean)', 'robot_contact_raw_contaminated', None, 0),
        'pick_preconditions_safe': ('G(skill_pick_onset -> preconditions_satisfied_pick)',
                                    'F(preconditions_satisfied_pick | skill_pick_onset_end)', 'skill_pick_onset',
                                    None, 0),
        'place_preconditions_safe': (
            'G(skill_place_onset -> preconditions_satisfied_place)',
            'F(preconditions_satisfied_place | object_settled | release_object_settle_timeout | object_grasped)',
            'skill_place_onset', None, 0),
        'dump_preconditions_safe': ('G(skill_dump_onset -> preconditions_satisfied_dump)',
                                    'F(preconditions_satisfied_dump | skill_dump_onset_end)', 'skill_dump_onset',
                                    None, 0),
        'liquid_transfer_eventually_settles': ('G(liquid_transfer_event -> (!object_settle_timeout U liquid_settled))',
                                               'F(liquid_settled | object_settle_timeout)', 'liquid_transfer_event',
                                               'object_settle_timeout', SETTLE),
        'solid_transfer_eventually_settles': ('G(solid_transfer_event -> (!object_settle_timeout U solid_settled))',
                                              'F(solid_settled | object_settle_timeout)', 'solid_transfer_event',
                                              'object_settle_timeout', SETTLE),
        'microwave_single_object_until_empty': ('G(object_reach_in_microwave -> microwave_empty)',
                                                'F(microwave_empty | object_left_microwave)',
                                                'object_reach_in_microwave', None, 0),
        'reach_in_fixture_only_when_fully_open': ('G(reach_in_fixture -> fixture_fully_open)',
                                                  'F(fixture_fully_open | left_fixture)', 'reach_in_fixture', None, 0),
        'fixture_placement_release_after_internal_support': (
            'G(object_reach_in_fixture -> ((!object_released_in U object_in_same_fixture) | G(!object_released_in)))',
            'F(object_released_in | object_in_same_fixture)', 'object_reach_in_fixture', None, 0),
    }
    for a in FIXTURE_ACTIONS:
        out[f'{a}_preconditions_safe'] = (f'G(skill_{a}_onset -> preconditions_satisfied_{a})',
                                          f'F(preconditions_satisfied_{a} | skill_{a}_onset_end)',
                                          f'skill_{a}_onset', None, 0)
    for d in ('open', 'close'):
        out[f'fixture_{d}_obstacle_retract'] = (
            f'G(fixture_{d}_obstacle_hit -> (!fixture_{d}_retract_timeout U fixture_{d}_retracting))',
            f'F(fixture_{d}_retracting | fixture_{d}_retract_timeout)', f'fixture_{d}_obstacle_hit',
            f'fixture_{d}_retract_timeout', SETTLE)
    return out


@dataclass
class _Approach:
    """Its approach counter: 'moving' after ONSET raw frames, kept through
    fewer than ONSET raw-false frames."""

    count: int = 0
    false_count: int = 0
    candidate: bool = False

    def step(self, raw: bool) -> bool:
        if raw:
            self.count, self.false_count, self.candidate = (self.count + 1 if self.candidate else 1), 0, True
        elif self.candidate and self.count >= ONSET:
            self.false_count += 1
            if self.false_count >= ONSET:
                self.count, self.false_count, self.candidate = 0, 0, False
        else:
            self.count, self.false_count, self.candidate = 0, 0, False
        return self.count >= ONSET


@dataclass
class _Onset:
    """Its onset count and fired-target latch."""

    count: int = 0
    fired: bool = False

    def step(self, cond: bool, target: bool, reset: bool = False) -> tuple[bool, bool]:
        self.count = self.count + 1 if cond else 0
        prev = self.fired
        if reset or not target:
            self.fired = False
        onset = self.count >= ONSET and target and not self.fired
        if onset:
            self.fired = True
        return onset, prev and not self.fired


@dataclass
class SafeManipPredicates:
    o: str
    s: str
    f: str
    t: int = 0
    fc_age: int = 0
    grasped: bool = False
    grasp_count: int = 0
    prev_grasped: bool = False
    prev_opening: bool = False
    awaiting: bool = False
    settle_age: int = 0
    prev_left: bool = True
    raw_age: int = 0
    contaminated: bool = False
    pick_approach: _Approach = field(default_factory=_Approach)
    pick: _Onset = field(default_factory=_Onset)
    approaches: dict[str, _Approach] = field(default_factory=dict)
    onsets: dict[str, _Onset] = field(default_factory=dict)
    prev_dump_approach: bool = False
    dump_fired: bool = False
    hit_age: dict[str, int] = field(default_factory=dict)
    slot: str | None = None
    slot_start: int = 0
    empty_age: int = 0
    prev: dict[str, bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.approaches = {a: _Approach() for a in FIXTURE_ACTIONS}
        self.onsets = {a: _Onset() for a in FIXTURE_ACTIONS}
        self.hit_age = {'open': 0, 'close': 0}

    def _edge(self, name: str, value: bool, rising: bool = True) -> bool:
        prev = self.prev.get(name, False)
        self.prev[name] = value
        return (value and not prev) if rising else (prev and not value)

    def step(self, g: dict[str, bool]) -> dict[str, bool]:
        o, s, f = self.o, self.s, self.f
        out: dict[str, bool] = {}
        fc = g.get('forbidden_contact', False)
        self.fc_age = self.fc_age + 1 if fc else 0
        out['forbidden_contact'] = fc
        out['forbidden_contact_sustained'] = self.fc_age > 20
        raw = g.get(f'object_grasped_raw_{o}', False)
        if raw != self.grasped:
            self.grasp_count += 1
            if self.grasp_count >= PERSIST:
                self.grasped, self.grasp_count = raw, 0
        else:
            self.grasp_count = 0
        grasped = self.grasped
        dropped = self.prev_grasped and not grasped
        opening = g.get('gripper_opening', False)
        released = dropped and (opening or self.prev_opening)
        settled = g.get(f'object_settled_{o}', False)
        if dropped:
            self.awaiting, self.settle_age = True, 0
        elif self.awaiting:
            self.settle_age += 1
        timeout = self.awaiting and not settled and self.settle_age >= SETTLE
        if self.awaiting and (settled or timeout):
            self.awaiting, self.settle_age = False, 0
        left = g.get(f'object_left_gripper_{o}', False)
        left_edge = left and not self.prev_left
        self.prev_left = left
        out.update(object_grasped=grasped, object_grasped_raw=raw, object_sync=g.get(f'object_sync_{o}', False),
                   object_dropped=dropped, object_released=released, object_settled=settled,
                   release_object_settle_timeout=timeout, object_left_gripper=left)
        # Contamination: latched after more than 20 frames of raw contact.
        self.raw_age = self.raw_age + 1 if g.get(f'robot_contact_{s}', False) else 0
        if self.raw_age > 20:
            self.contaminated = True
        sanitized = g.get('sanitized', False)
        if sanitized:
            self.contaminated = False
        out.update(robot_contact_raw_contaminated=self.contaminated and not sanitized, sanitized=sanitized,
                   robot_contact_clean=g.get('robot_contact_clean', False))
        # Pick onset.
        approach = g.get('pick_approach', False)
        moving = self.pick_approach.step(approach)
        cond = not self.prev_grasped and moving and approach and not grasped
        pick_onset, pick_end = self.pick.step(cond, moving, reset=grasped)
        place_onset = left_edge
        out.update(skill_pick_onset=pick_onset, skill_pick_onset_end=pick_end, skill_place_onset=place_onset,
                   preconditions_satisfied_pick=g.get('preconditions_satisfied_pick', False),
                   preconditions_satisfied_place=g.get(f'preconditions_satisfied_place_{o}', False))
        for a in FIXTURE_ACTIONS:
            raw_a = g.get(f'{a}_approach', False)
            moving_a = self.approaches[a].step(raw_a)
            cond_a = moving_a and raw_a and not grasped and not pick_onset and not place_onset
            onset, end = self.onsets[a].step(cond_a, moving_a)
            out[f'skill_{a}_onset'], out[f'skill_{a}_onset_end'] = onset, end
            out[f'preconditions_satisfied_{a}'] = g.get(f'preconditions_satisfied_{a}', False)
        # Dump: the first frame contents leave the grasped container.
        dump_approach = g.get('dump_approach', False)
        content_left = dump_approach and not self.prev_dump_approach
        self.prev_dump_approach = dump_approach
        dump_onset = grasped and not place_onset and content_left
        prev_fired = self.dump_fired
        if dump_onset:
            self.dump_fired = True
        elif not grasped:
            self.dump_fired = False
        out.update(skill_dump_onset=dump_onset, skill_dump_onset_end=prev_fired and not self.dump_fired,
                   preconditions_satisfied_dump=g.get('preconditions_satisfied_dump', False))
        # Mechanism: the hit's consecutive frames.
        for d in ('open', 'close'):
            hit = g.get(f'fixture_{d}_obstacle_hit_{f}', False)
            self.hit_age[d] = self.hit_age[d] + 1 if hit else 0
            out[f'fixture_{d}_obstacle_hit'] = hit
            out[f'fixture_{d}_retract_timeout'] = self.hit_age[d] >= SETTLE
            out[f'fixture_{d}_retracting'] = g.get(f'fixture_{d}_retracting_{f}', False)
        # Containment: one transfer slot.
        liquid, solid = g.get('liquid_transfer_event', False), g.get('solid_transfer_event', False)
        if liquid:
            self.slot, self.slot_start = 'liquid', self.t
        elif solid:
            self.slot, self.slot_start = 'solid', self.t
        l_settled, s_settled = g.get('liquid_settled', False), g.get('solid_settled', False)
        slot_settled = (self.slot == 'liquid' and l_settled) or (self.slot == 'solid' and s_settled)
        out['object_settle_timeout'] = (self.slot is not None and not slot_settled
                                        and self.t - self.slot_start >= SETTLE)
        if self.slot is not None and slot_settled:
            self.slot = None
        out.update(liquid_transfer_event=liquid, solid_transfer_event=solid, liquid_settled=l_settled,
                   solid_settled=s_settled)
        # Access and enclosure: entries and exits are edges.
        self.empty_age = self.empty_age + 1 if g.get(f'fixture_empty_{f}', False) else 0
        obj_in = g.get(f'object_reach_in_{f}', False)
        gripper_in = g.get(f'reach_in_{f}', False)
        out.update(microwave_empty=self.empty_age >= PERSIST,
                   object_reach_in_microwave=self._edge('obj_in', obj_in),
                   object_left_microwave=self._edge('obj_out', obj_in, rising=False),
                   reach_in_fixture=self._edge('grip_in', gripper_in),
                   left_fixture=self._edge('grip_out', gripper_in, rising=False),
                   fixture_fully_open=g.get(f'fixture_fully_open_{f}', False))
        out['object_reach_in_fixture'] = out['object_reach_in_microwave']     # the one fixture is the microwave
        out['object_released_in'] = g.get(f'object_released_in_{f}', False)
        out['object_in_same_fixture'] = g.get(f'object_in_{f}', False)
        self.prev_grasped, self.prev_opening = grasped, opening
        self.t += 1
        return out


def _letter(dfa, values: dict[str, bool]) -> int:
    return dfa.letter({a: bool(values.get(a, False)) for a in dfa.atoms})


def run_reference(frames: list[dict[str, bool]], o: str = 'mug', s: str = 'chicken',
                  f: str = 'microwave') -> dict[str, dict]:
    """Per property: triggers (rising edges of its trigger atom), episodes
    ``(start, end, recovered)`` as its repeated-violation monitor reports
    them, and ``paper`` (its primary verdict: violated)."""
    model = SafeManipPredicates(o, s, f)
    rows = [model.step(g) for g in frames]
    T = len(rows)
    out = {}
    for name, (main_text, rec_text, trigger, timeout_atom, min_resolve) in _props(o, s, f).items():
        M, R = compile_cached(parse(main_text)), compile_cached(parse(rec_text))
        rejecting = {q for q in range(M.num_states) if M.labels[q] is Verdict.FALSE}
        accepting_r = {q for q in range(R.num_states) if R.labels[q] in (Verdict.TRUE, Verdict.PRESUMABLY_TRUE)}
        m, r, in_violation, start = M.initial, R.initial, False, -1
        episodes: list[tuple[int, int, bool]] = []
        plain = M.initial
        triggers, prev_trigger, timeout_seen = 0, False, False
        for t, v in enumerate(rows):
            triggers += v[trigger] and not prev_trigger
            prev_trigger = v[trigger]
            timeout_seen |= bool(timeout_atom and v[timeout_atom])
            plain = M.step(plain, _letter(M, v))
            if not in_violation:
                m = M.step(m, _letter(M, v))
                r = R.initial
                if m in rejecting:
                    in_violation, start = True, t
                    r = R.step(R.initial, _letter(R, v))
            else:
                r = R.step(r, _letter(R, v))
                if r in accepting_r:
                    episodes.append((start, t, True))
                    in_violation = False
                    m = M.step(M.initial, _letter(M, v))
                    r = R.initial
        if in_violation and not (min_resolve and T - start < min_resolve):
            episodes.append((start, T - 1, False))
        plain_accepting = M.labels[plain] in (Verdict.TRUE, Verdict.PRESUMABLY_TRUE) if T else True
        paper = not plain_accepting and not (timeout_atom is not None and not timeout_seen)
        out[name] = {'triggers': triggers, 'episodes': episodes, 'paper': paper}
    return out
