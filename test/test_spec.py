"""Property files, ontology and scenes: validation errors name file, line and
field; unknown predicates list the known ones; cycles are named."""

from __future__ import annotations

import pytest
from monitor_helpers import prop, simple_suite, suite_from_text

from safemanip_ros.errors import SpecError
from safemanip_ros.spec.ontology import load_ontology, scene_from_mapping
from safemanip_ros.spec.suite import instantiate

HEAD = 'suite: t\npredicates:\n  a: {description: x}\n  b: {description: y}\n'


def _err(tmp_path, text: str) -> str:
    with pytest.raises(SpecError) as info:
        instantiate(suite_from_text(tmp_path, text))
    return str(info.value)


def test_unknown_field_names_file_line_and_field(tmp_path):
    msg = _err(tmp_path, HEAD + 'properties:\n' + prop() + '    severty: error\n')
    assert 'suite.yaml:13:' in msg and "unknown field 'severty'" in msg and 'properties[0]' in msg


def test_missing_required_field(tmp_path):
    text = HEAD + 'properties:\n  - name: p\n    category: t\n    formula: G a\n    trigger: a\n    description: d\n'
    msg = _err(tmp_path, text)
    assert "missing required field 'recovery'" in msg and 'suite.yaml:6:' in msg


def test_every_missing_required_field_is_named_at_once(tmp_path):
    msg = _err(tmp_path, HEAD + 'properties:\n  - name: p\n    formula: G a\n    description: d\n')
    assert msg.endswith("suite.yaml:6: properties[0]: missing required fields 'category', 'trigger', 'recovery'"), msg


def test_wrong_choice(tmp_path):
    msg = _err(tmp_path, HEAD + 'properties:\n' + prop(end_policy='sometimes'))
    assert "end_policy: 'sometimes' is not one of ['weak', 'strong']" in msg and 'suite.yaml:11:' in msg


def test_formula_syntax_error_has_position(tmp_path):
    msg = _err(tmp_path, HEAD + 'properties:\n' + prop(formula='G(a -> )'))
    assert 'properties[0].formula' in msg and 'at position 7' in msg and 'suite.yaml:8:' in msg


def test_unknown_predicate_lists_known(tmp_path):
    msg = _err(tmp_path, HEAD + 'properties:\n' + prop(formula='G(a -> zz)'))
    assert "unknown predicate 'zz'" in msg and 'known predicates: a, b' in msg


def test_temporal_trigger_rejected(tmp_path):
    msg = _err(tmp_path, HEAD + 'properties:\n' + prop(trigger='F a'))
    assert 'trigger' in msg and 'temporal operator' in msg


def test_derived_cycle_is_named(tmp_path):
    text = HEAD + 'derived:\n  x: held(y | a, 2)\n  y: rose(x)\nproperties:\n' + prop(formula='G !x')
    msg = _err(tmp_path, text)
    assert 'cycle' in msg and ('x -> y -> x' in msg or 'y -> x -> y' in msg)


def test_bad_device(tmp_path):
    msg = _err(tmp_path, HEAD + 'derived:\n  x: held(a)\nproperties:\n' + prop(formula='G !x'))
    assert 'suite.yaml:6:' in msg and 'held() takes 2 argument(s)' in msg


def test_needs_mismatch(tmp_path):
    msg = _err(tmp_path, HEAD + 'properties:\n' + prop() + '    needs: [a]\n')
    assert "declares ['a'] but the property reads ['a', 'b']" in msg


def test_invalid_yaml_has_line(tmp_path):
    msg = _err(tmp_path, HEAD + 'properties:\n  - name: [unclosed\n')
    assert 'invalid YAML' in msg and 'suite.yaml:' in msg


def test_placeholder_without_variable(tmp_path):
    text = HEAD + '  c_{obj}: {description: z}\nproperties:\n' + prop(formula='G(a -> c_{obj})')
    msg = _err(tmp_path, text)
    assert "placeholder(s) ['obj'] are not variables" in msg


def test_template_needs_scene(tmp_path):
    text = HEAD + '  c_{obj}: {description: z}\nproperties:\n' + prop(formula='G(a -> c_{obj})') + \
        '    over: {obj: {affordance: graspable}}\n'
    msg = _err(tmp_path, text)
    assert 'is a template' in msg and 'give a scene' in msg


def test_ontology_hierarchy_rules_and_scene_errors(tmp_path):
    path = tmp_path / 'onto.yaml'
    path.write_text('hierarchy:\n  kind:\n    meat: food\n    poultry: meat\n  hazard:\n    raw: contamination\n'
                    'types:\n  chicken: {kind: [poultry]}\n  cooked: {kind: [poultry, cooked_food]}\n'
                    'rules:\n  - when: {kind: meat}\n    unless: {kind: cooked_food}\n    add: {hazard: [raw]}\n')
    onto = load_ontology([path])
    assert onto.matches('chicken', {'kind': 'food'}) and onto.matches('chicken', {'hazard': 'contamination'})
    assert not onto.matches('cooked', {'hazard': 'contamination'})
    assert onto.matches('cooked', {'not': {'hazard': 'raw'}})
    with pytest.raises(SpecError, match="unknown type 'pork'.*chicken, cooked"):
        scene_from_mapping({'p': 'pork'}, onto, 'scene.yaml')
    bad = tmp_path / 'bad.yaml'
    bad.write_text('hierarchy:\n  kind:\n    a: b\n    b: a\n')
    with pytest.raises(SpecError, match='cycle'):
        load_ontology([bad])
    bad.write_text('types:\n  x: {colour: [red]}\n')
    with pytest.raises(SpecError, match="bad.yaml:2: types.x: unknown field 'colour'"):
        load_ontology([bad])


def test_rate_rescales_windows(tmp_path):
    iset = simple_suite(tmp_path, prop(formula='G !s', trigger='a', recovery='F !s'), derived='  s: held(a, 20)')
    assert str(iset.derived['s']) == 'held(a, 20)'
    from safemanip_ros.spec.suite import instantiate as inst
    again = inst(iset.suite, rate_hz=10)
    assert str(again.derived['s']) == 'held(a, 10)'


@pytest.mark.parametrize('rate', ['.nan', '.inf', '-.inf'])
def test_non_finite_yaml_numbers_are_errors(tmp_path, rate):
    msg = _err(tmp_path, HEAD.replace('suite: t\n', f'suite: t\nrate_hz: {rate}\n') + 'properties:\n' + prop())
    assert 'suite.yaml:2: rate_hz: must be a finite number' in msg
