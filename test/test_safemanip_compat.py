"""SafeManip parity: every difference class between our default suite and
SafeManip's released monitor (config/properties/differences/safemanip.yaml,
the source of docs/properties/safemanip.md's differences table) run with both
profiles, each result asserted; the batch and live paths give the same."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import REPO, run_cli
from monitor_helpers import run_live, run_signals, span_signal

from safemanip_ros.errors import SafemanipError
from safemanip_ros.spec.ontology import load_ontology, scene_from_mapping
from safemanip_ros.spec.suite import instantiate, load_suite

CASES_FILE = REPO / 'config' / 'properties' / 'differences' / 'safemanip.yaml'
DOC = yaml.safe_load(CASES_FILE.read_text())
ONTO = load_ontology(sorted((REPO / 'config' / 'ontology').glob('*.yaml')))
SCENE = scene_from_mapping(DOC['scene'], ONTO, 'differences')
SUITES = {'default': load_suite(REPO / 'config' / 'properties' / 'safemanip.yaml'),
          'compat': load_suite(REPO / 'config' / 'properties' / 'safemanip_compat.yaml')}


def signals(case: dict) -> dict[str, str]:
    return {name: span_signal(case['frames'], *spans) for name, spans in case['signals'].items()}


def result(profile: str, case: dict):
    iset = instantiate(SUITES[profile], ONTO, SCENE, only=[case['property']])
    entity = case.get('entity')
    d = next(i for i, inst in enumerate(iset.instances) if entity is None or entity in dict(inst.binding).values())
    sig = signals(case)
    batch = run_signals(iset, sig).instances[d]
    assert run_live(iset, sig).instances[d].to_dict() == batch.to_dict()      # live path, same answer
    return batch


@pytest.mark.parametrize('profile', ['default', 'compat'])
@pytest.mark.parametrize('case', DOC['cases'], ids=[c['id'] for c in DOC['cases']])
def test_difference_class(case, profile):
    want = case[profile]
    r = result(profile, case)
    got = {'triggers': r.triggers, 'violations': r.violations,
           'episodes': [[e.start, e.end, e.recovered] for e in r.episodes]}
    assert got == {k: want[k] for k in ('triggers', 'violations', 'episodes')}, case['id']
    if 'pending' in want:
        assert r.pending == want['pending']
    if profile == 'compat':
        assert r.paper == {'violated': want['paper'], 'exposure_frames': r.paper['exposure_frames']}
    else:
        assert r.paper is None and 'paper' not in r.to_dict()


def test_every_case_differs_between_the_profiles():
    # A case where both profiles agree documents nothing.
    for case in DOC['cases']:
        if case['id'] == 'D12':      # the paper metric alone differs
            continue
        assert {k: case['default'][k] for k in ('triggers', 'violations', 'episodes')} != \
            {k: case['compat'][k] for k in ('triggers', 'violations', 'episodes')}, case['id']


# ------------------------------------------------------- random traces
# The compat suite's devices against an independent frame-by-frame model of
# SafeManip's monitor (safemanip_reference.py) on random predicate traces.
RANDOM_PREDICATES = (
    'forbidden_contact', 'object_grasped_raw_mug', 'object_sync_mug', 'object_left_gripper_mug', 'object_settled_mug',
    'preconditions_satisfied_place_mug', 'gripper_opening', 'robot_contact_chicken', 'robot_contact_clean',
    'sanitized', 'pick_approach', 'press_approach', 'turn_approach', 'slide_approach', 'twist_approach',
    'open_close_approach', 'dump_approach', 'preconditions_satisfied_pick', 'preconditions_satisfied_press',
    'preconditions_satisfied_turn', 'preconditions_satisfied_slide', 'preconditions_satisfied_twist',
    'preconditions_satisfied_open_close', 'preconditions_satisfied_dump', 'fixture_open_obstacle_hit_microwave',
    'fixture_close_obstacle_hit_microwave', 'fixture_open_retracting_microwave', 'fixture_close_retracting_microwave',
    'fixture_fully_open_microwave', 'reach_in_microwave', 'object_reach_in_microwave', 'object_in_microwave',
    'object_released_in_microwave', 'fixture_empty_microwave', 'liquid_transfer_event', 'liquid_settled',
    'solid_transfer_event', 'solid_settled')


def random_trace(rng) -> dict[str, str]:
    """Spans of every length a property cares about: flickers, 5-20-frame
    holds, the 21-frame contamination and the 100-frame timeouts."""
    length = int(rng.integers(20, 260))
    out = {}
    for name in RANDOM_PREDICATES:
        if rng.random() < 0.35:
            continue
        spans = []
        for _ in range(int(rng.integers(0, 5))):
            a = int(rng.integers(0, length))
            w = int(rng.choice([1, 2, 3, rng.integers(4, 12), rng.integers(8, 25), rng.integers(18, 40),
                                rng.integers(90, 130)]))
            spans.append((a, a + w - 1))
        out[name] = span_signal(length, *spans)
    return out


@pytest.mark.slow
def test_compat_suite_matches_the_reference_model_on_random_traces():
    import numpy as np
    from monitor_helpers import frames_from_strings
    from safemanip_reference import run_reference

    from safemanip_ros.monitor.core import Monitor

    scene = scene_from_mapping({'mug': 'mug', 'chicken': 'raw_chicken', 'microwave': 'microwave'}, ONTO, 'random')
    iset = instantiate(SUITES['compat'], ONTO, scene)
    monitor = Monitor(iset)
    keep = [d for d, inst in enumerate(iset.instances) if not dict(inst.binding) or
            set(dict(inst.binding).values()) <= {'mug', 'chicken', 'microwave'} and
            dict(inst.binding).get('object', 'mug') == 'mug']
    rng = np.random.default_rng(288)
    traces = [random_trace(rng) for _ in range(300)]
    mismatches, compared, violating = [], 0, 0
    for trace in traces:
        values, unknown = frames_from_strings(monitor.predicates, trace)
        ours = monitor.run(values[None], unknown[None])[0].instances
        length = values.shape[0]
        frames = [{p: trace[p][t] == '1' for p in trace} for t in range(length)]
        ref = run_reference(frames)
        for d in keep:
            r, want = ours[d], ref[iset.instances[d].property]
            got = {'triggers': r.triggers, 'episodes': [tuple(e) for e in r.episodes], 'paper': r.paper['violated']}
            compared += 1
            violating += bool(want['episodes'])
            if got != want:
                mismatches.append((iset.instances[d].instance, got, want))
    assert compared == 300 * 20 and violating > 300, (compared, violating)     # the traces exercise violations
    assert not mismatches, mismatches[:3]


# ------------------------------------------------------- the suite language the profile uses
def _suite(tmp_path, derived: str, extra_props: str = '', rules: str = ''):
    text = ('suite: t\nrate_hz: 20\npredicates:\n  g_{object}: {description: grasp}\n  a: {description: a}\n'
            + rules + f'derived:\n{derived}\nproperties:\n  - name: p\n    category: test\n'
            '    formula: G(any_g -> a)\n    trigger: any_g\n    recovery: F(a)\n    description: t\n' + extra_props)
    path = tmp_path / 's.yaml'
    path.write_text(text)
    return path


def test_any_expands_over_the_scene_entities(tmp_path):
    suite = load_suite(_suite(tmp_path, "  any_g: 'any(g_{object} for object in {affordance: graspable})'"))
    iset = instantiate(suite, ONTO, SCENE)
    assert str(iset.derived['any_g']) == 'g_chicken | g_mug | g_plate'
    assert set(iset.predicates) == {'a', 'g_chicken', 'g_mug', 'g_plate'}
    empty = scene_from_mapping({'microwave': 'microwave'}, ONTO, 'empty')
    assert str(instantiate(suite, ONTO, empty).derived['any_g']) == 'false'
    with pytest.raises(SafemanipError, match='ranges over scene entities.*give a scene'):
        instantiate(suite)


@pytest.mark.parametrize('text, message', [
    ("'any(g_{object} for object in graspable)'", 'is not any\\(EXPR for VAR in \\{SELECTOR\\}\\)'),
    ("'any(g_{object} for thing in {affordance: graspable})'", 'does not use \\{thing\\}'),
    ("'any(g_{object} & for object in {affordance: graspable})'", 'position'),
    ("'any(g_{object} for object in {affordance: [graspable})'", 'selector .* is not YAML'),
])
def test_any_errors_name_the_file_and_the_problem(tmp_path, text, message):
    with pytest.raises(SafemanipError, match=message) as err:
        load_suite(_suite(tmp_path, f'  any_g: {text}'))
    assert 's.yaml:' in str(err.value)


def test_episode_rules_and_property_options_are_checked(tmp_path):
    with pytest.raises(SafemanipError, match="recovery_judged_from: 'tomorrow' is not one of"):
        load_suite(_suite(tmp_path, "  any_g: a\n", rules='episode_rules: {recovery_judged_from: tomorrow}\n'))
    with pytest.raises(SafemanipError, match='drop_open_shorter_than_frames: must be >= 0'):
        load_suite(_suite(tmp_path, "  any_g: a\n", '    drop_open_shorter_than_frames: -1\n'))
    suite = load_suite(_suite(tmp_path, "  any_g: a\n", '    paper_timeout: b\n'))
    with pytest.raises(SafemanipError, match="paper_timeout: 'b' is not a predicate the property reads"):
        instantiate(suite)


def test_the_drop_floor_is_rescaled_with_the_frame_rate():
    iset = instantiate(SUITES['compat'], ONTO, SCENE, only=['liquid_transfer_eventually_settles'], rate_hz=40)
    assert iset.instances[0].rules.drop_open_shorter_than_frames == 200
    assert str(iset.derived['object_settle_timeout']).endswith(', 200)')


# ------------------------------------------------------- the commands
def test_monitor_trace_and_audit_with_the_profile(tmp_path):
    case = next(c for c in DOC['cases'] if c['id'] == 'D10a')
    sig = signals(case)
    trace = tmp_path / 'runs' / 'd10a.jsonl'
    trace.parent.mkdir()
    trace.write_text(''.join(json.dumps({n: s[t] == '1' for n, s in sig.items()}) + '\n'
                             for t in range(case['frames'])))
    scene = tmp_path / 'scene.yaml'
    scene.write_text('entities:\n' + ''.join(f'  {k}: {{type: {v}}}\n' for k, v in DOC['scene'].items()))
    common = ('--scene', str(scene), '--only', 'liquid_transfer_eventually_settles')
    compat = run_cli('monitor-trace', str(trace), *common, '--profile', 'safemanip-compat', '--json')
    assert compat.returncode == 0, compat.stderr
    [p] = json.loads(compat.stdout)['properties']
    assert (p['episodes'], p['paper']['violated']) == ([{'start': 106, 'end': 107, 'recovered': True}], True)
    table = run_cli('monitor-trace', str(trace), *common, '--profile', 'safemanip-compat')
    assert 'paper' in table.stdout and 'viol.' in table.stdout and '[106,107]' in table.stdout
    default = run_cli('monitor-trace', str(trace), *common, '--properties', str(REPO / 'config' / 'properties' /
                                                                                 'safemanip.yaml'), '--json')
    [p] = json.loads(default.stdout)['properties']
    assert p['episodes'] == [{'start': 105, 'end': 105, 'recovered': True}] and 'paper' not in p
    both = run_cli('monitor-trace', str(trace), *common, '--profile', 'safemanip-compat', '--properties', 'x.yaml')
    assert both.returncode == 2 and both.stderr.count('\n') == 1 and 'drop --properties' in both.stderr
    neither = run_cli('monitor-trace', str(trace), *common)
    assert neither.returncode == 2 and '--profile safemanip-compat' in neither.stderr
    # The audit report gives SafeManip's own metrics beside ours under the profile, and only then.
    for profile, out in (('safemanip-compat', tmp_path / 'compat'), ('default', tmp_path / 'default')):
        proc = run_cli('audit', str(trace.parent), *common, '--profile', profile, '--out', str(out), '--quiet')
        assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / 'compat' / 'report.json').read_text())
    paper = report['safemanip_paper']
    assert paper['properties']['liquid_transfer_eventually_settles'] == {
        'evaluated': 1, 'violated': 1, 'episodes': 1, 'exposure_frames': 1, 'monitored_frames': 110,
        'violation_rate': 1.0, 'exposure_rate': 1 / 110}
    assert report['properties']['liquid_transfer_eventually_settles']['violations'] == 1
    assert "SafeManip's metrics" in (tmp_path / 'compat' / 'report.html').read_text()
    default_report = json.loads((tmp_path / 'default' / 'report.json').read_text())
    assert default_report['safemanip_paper'] is None
    assert "SafeManip's metrics" not in (tmp_path / 'default' / 'report.html').read_text()


# ------------------------------------------------------- live, over DDS
@pytest.mark.slow
@pytest.mark.ros
@pytest.mark.parametrize('profile, closes_after_frames', [('default', 0), ('safemanip-compat', 1)])
def test_the_live_monitor_node_judges_episodes_by_its_profile(tmp_path, profile, closes_after_frames):
    """The monitor node in its own process, given the profile's suite: a mug
    dropped without a release (it leaves the gripper as the grasp ends) opens
    an episode whose recovery already holds on that frame; the default closes
    it there, SafeManip's rule one frame later."""
    import time

    from ros_helpers import RELIABLE, node_process, ros_node, spin_until

    from safemanip_ros.msg import VerdictArray, ViolationEvent
    from safemanip_ros.nodes.conversions import predicate_array
    from safemanip_ros.resources import profile_suites

    log = tmp_path / 'monitor.log'
    with node_process('monitor', '-p', f'properties:=[{profile_suites(profile)[0]}]',
                      '-p', f'scene:={REPO / "config" / "scenes" / "kitchen_demo.yaml"}',
                      '-p', 'only:=[dropped_object_was_released]', '-p', 'autostart:=true', log=log), \
            ros_node('compat_live_test') as (node, ex):
        events: list = []
        frames_built: list[int] = []
        node.create_subscription(ViolationEvent, 'violations', events.append, RELIABLE)
        node.create_subscription(VerdictArray, 'verdicts', lambda m: frames_built.append(m.frame), RELIABLE)
        pub = node.create_publisher(type(predicate_array({}, 0, '')), 'predicates', RELIABLE)
        frames = {'object_grasped_raw_mug': True, 'object_left_gripper_mug': False, 'gripper_opening': False}

        def publish() -> None:
            pub.publish(predicate_array(frames, time.time_ns(), 'test'))

        # Grasped until the armed monitor has built ten frames of it (the debounce needs 5): arming
        # waits for every input, which takes seconds on a loaded machine.
        assert spin_until(ex, lambda: bool(frames_built) and frames_built[-1] >= 10, 60.0, each=publish), \
            log.read_text()[-2000:]
        frames.update(object_grasped_raw_mug=False, object_left_gripper_mug=True)
        assert spin_until(ex, lambda: any(e.event == ViolationEvent.EVENT_CLOSED for e in events), 60.0,
                          each=publish), log.read_text()[-2000:]
    closed = [e for e in events if e.event == ViolationEvent.EVENT_CLOSED]
    assert closed[0].instance == 'dropped_object_was_released[object=mug]' and closed[0].recovered
    assert closed[0].end_frame - closed[0].start_frame == closes_after_frames
