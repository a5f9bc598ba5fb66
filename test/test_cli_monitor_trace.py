"""``safemanip monitor-trace`` contract."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import (
    REPO,  # noqa: E402
    run_cli,
)

SAFEMANIP = str(REPO / 'config' / 'properties' / 'safemanip.yaml')
SCENE = str(REPO / 'config' / 'scenes' / 'kitchen_demo.yaml')


def _trace(tmp_path: Path, frames: list[dict]) -> str:
    path = tmp_path / 'trace.jsonl'
    path.write_text(''.join(json.dumps(f) + '\n' for f in frames))
    return str(path)


def test_json_output_shape(tmp_path):
    frames = [{'forbidden_contact': t >= 2} for t in range(30)]
    frames[5]['forbidden_contact'] = None      # unknown: counted, read as unknown_as (true)
    proc = run_cli('monitor-trace', _trace(tmp_path, frames), '--properties', SAFEMANIP,
                   '--only', 'no_forbidden_contact', '--json')
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out['frames'] == 30
    [p] = out['properties']
    assert {k: p[k] for k in ('name', 'instance', 'category', 'triggers', 'violations', 'pending')} == {
        'name': 'no_forbidden_contact', 'instance': 'no_forbidden_contact', 'category': 'collision_contact',
        'triggers': 1, 'violations': 1, 'pending': False}
    assert p['unknown_frames'] == {'forbidden_contact': 1}
    assert p['episodes'] == [{'start': 22, 'end': 29, 'recovered': False}]
    assert p['unsafe_frames'] == 8


def test_whole_suite_with_scene(tmp_path):
    proc = run_cli('monitor-trace', _trace(tmp_path, [{'reach_in_microwave': True}, {}]), '--properties', SAFEMANIP,
                   '--scene', SCENE, '--json')
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    names = {p['instance']: p for p in out['properties']}
    assert names['reach_in_fixture_only_when_fully_open[fixture=microwave]']['violations'] == 1
    assert len(names) > 20


@pytest.mark.parametrize('frames, args, message', [
    ([{'no_such': True}], ['--only', 'no_forbidden_contact'],
     "trace.jsonl:1: unknown predicate 'no_such'; known predicates: "),
    ([{'forbidden_contact': 1}], ['--only', 'no_forbidden_contact'], "must be true, false or null"),
    ([5], ['--only', 'no_forbidden_contact'], 'trace.jsonl:1: a step must be a JSON object'),
    ([], ['--only', 'no_forbidden_contact'], 'empty trace'),
    ([{}], [], 'are templates bound to scene entities: give --scene'),
    ([{}], ['--only', 'nope'], "unknown properties ['nope']"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, frames, args, message):
    proc = run_cli('monitor-trace', _trace(tmp_path, frames), '--properties', SAFEMANIP, *args, '--json')
    assert proc.returncode == 2, proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr


def test_only_reads_a_recording_of_the_whole_suite(tmp_path):
    """``--only`` runs fewer properties, not another suite: a trace that gives the names the others read
    (a recording of the whole suite) is read, a name the suite does not know is still an error."""
    whole = {'forbidden_contact': False, 'reach_in_microwave': True, 'fixture_fully_open_microwave': False}
    args = ['--properties', SAFEMANIP, '--scene', SCENE, '--only', 'no_forbidden_contact', '--json']
    proc = run_cli('monitor-trace', _trace(tmp_path, [whole] * 3), *args)
    assert proc.returncode == 0, proc.stderr
    assert [p['instance'] for p in json.loads(proc.stdout)['properties']] == ['no_forbidden_contact']
    proc = run_cli('monitor-trace', _trace(tmp_path, [{**whole, 'reach_in_microwav': True}]), *args)
    assert proc.returncode == 2 and "unknown predicate 'reach_in_microwav'" in proc.stderr, proc.stderr
    assert 'reach_in_microwave' in proc.stderr          # listed among the known names


def test_malformed_line_number(tmp_path):
    path = tmp_path / 'trace.jsonl'
    path.write_text('{"forbidden_contact": true}\n{"forbidden_contact": tru}\n')
    proc = run_cli('monitor-trace', str(path), '--properties', SAFEMANIP, '--only', 'no_forbidden_contact')
    assert proc.returncode == 2 and 'trace.jsonl:2: invalid JSON' in proc.stderr


def test_device_cycle_is_named(tmp_path):
    suite = tmp_path / 's.yaml'
    suite.write_text('suite: s\npredicates:\n  a: {description: a}\nderived:\n  x: latch(a, y)\n  y: rose(x)\n'
                     'properties:\n  - {name: p, category: c, formula: G !x, trigger: a, recovery: F !x, '
                     'description: d}\n')
    proc = run_cli('monitor-trace', _trace(tmp_path, [{'a': True}]), '--properties', str(suite), '--json')
    assert proc.returncode == 2
    assert 'cycle: x -> y -> x' in proc.stderr and 's.yaml:' in proc.stderr


def test_one_trace_reader_rules(tmp_path):
    """monitor-trace reads what audit and check read: step lists (unlisted names
    false), null = unknown, unknown names an error unless allowed."""
    proc = run_cli('monitor-trace', _trace(tmp_path, [['forbidden_contact']] * 25 + [{'forbidden_contact': None}]),
                   '--properties', SAFEMANIP, '--only', 'no_forbidden_contact', '--json')
    assert proc.returncode == 0, proc.stderr
    [inst] = json.loads(proc.stdout)['properties']
    assert inst['violations'] == 1 and inst['unknown_frames'] == {'forbidden_contact': 1}
    path = _trace(tmp_path, [{'forbidden_contact': True, 'typo': True}])
    proc = run_cli('monitor-trace', path, '--properties', SAFEMANIP, '--only', 'no_forbidden_contact', '--json',
                   '--allow-unknown-predicates')
    assert proc.returncode == 0, proc.stderr
