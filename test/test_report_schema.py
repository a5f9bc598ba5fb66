"""``audit/schema.py`` is the single description of what the audit writes:
every record a real audit produces — the per-source result files, the
episode and instance records in them, and report.json with its rows — has
exactly the keys its TypedDict declares (none missing, none undeclared) with
values of the declared types.  A field added to a producer without the
schema, or to the schema without a producer, fails here."""

from __future__ import annotations

import json
import types
import typing
from typing import Any, Union

import pytest
from conftest import REPO, write_policy_traces

from safemanip_ros.audit.engine import AuditConfig, run_audit
from safemanip_ros.audit.report import build_report, predrawn_timelines, report_json
from safemanip_ros.audit.schema import Report, SourceResult

SCENE = str(REPO / 'config' / 'scenes' / 'kitchen_demo.yaml')
SUITES = {'default': REPO / 'config' / 'properties' / 'safemanip.yaml',
          'compat': REPO / 'config' / 'properties' / 'safemanip_compat.yaml'}


def mismatches(value: Any, tp: Any, where: str = '$') -> list[str]:
    """Where ``value`` (decoded JSON) does not have type ``tp``: a TypedDict's
    keys exactly (required all present, nothing undeclared), lists, dicts,
    tuples (JSON lists of that length), unions and Optional."""
    if tp is Any:
        return []
    if typing.is_typeddict(tp):
        if not isinstance(value, dict):
            return [f'{where}: {type(value).__name__}, not an object ({tp.__name__})']
        hints = typing.get_type_hints(tp)
        out = [f'{where}: no {k!r} ({tp.__name__} requires it)' for k in sorted(tp.__required_keys__ - value.keys())]
        out += [f'{where}: {k!r} is not in {tp.__name__}' for k in sorted(value.keys() - hints.keys())]
        for k in sorted(value.keys() & hints.keys()):
            out += mismatches(value[k], hints[k], f'{where}.{k}')
        return out
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        tried = [mismatches(value, a, where) for a in args]
        return [] if any(not t for t in tried) else min(tried, key=len)
    if origin is list:
        if not isinstance(value, list):
            return [f'{where}: {type(value).__name__}, not a list']
        return [m for k, v in enumerate(value) for m in mismatches(v, args[0], f'{where}[{k}]')]
    if origin is tuple:
        if not isinstance(value, list) or len(value) != len(args):
            return [f'{where}: {value!r}, not a list of {len(args)}']
        return [m for k, (v, a) in enumerate(zip(value, args)) for m in mismatches(v, a, f'{where}[{k}]')]
    if origin is dict:
        if not isinstance(value, dict):
            return [f'{where}: {type(value).__name__}, not an object']
        return [m for k, v in value.items() for m in mismatches(v, args[1], f'{where}[{k!r}]')]
    if tp is type(None):
        return [] if value is None else [f'{where}: {value!r}, not null']
    if tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, tp)
    return [] if ok else [f'{where}: {value!r}, not {tp.__name__}']


@pytest.mark.parametrize('profile', ['default', 'compat'])
def test_every_record_an_audit_writes_is_what_the_schema_says(tmp_path, profile):
    cfg = AuditConfig((str(SUITES[profile]),), SCENE, success='task_done')
    out = tmp_path / 'out'
    results, skipped = run_audit([str(p) for p in write_policy_traces(tmp_path)], cfg, out)
    stored = [json.loads(f.read_text()) for f in sorted((out / 'episodes').glob('*.json'))]
    assert len(stored) == 3 and skipped == []
    problems = [m for s in stored for m in mismatches(s, SourceResult, s['source'])]
    instances = [i for s in stored for e in s['episodes'] for i in e['instances']]
    # The optional keys are exercised too: a drawn timeline, and the paper verdict under the compat profile.
    assert any('timeline_svg' in e for s in stored for e in s['episodes'])
    assert all(('paper' in i) == (profile == 'compat') for i in instances) and instances
    predrawn_timelines(results)                  # the timelines leave the results before the report
    report = build_report(results, skipped, {'properties': list(cfg.properties), 'success': cfg.success,
                                             'reduction': cfg.reduction})
    decoded = json.loads(report_json(report))
    problems += mismatches(decoded, Report, 'report.json')
    assert problems == []
    assert decoded['rollouts'] == 4 and len(decoded['horizons']) >= 2 and len(decoded['policies']) == 2
    assert (decoded['safemanip_paper'] is not None) == (profile == 'compat')


@pytest.mark.parametrize('record, problem', [
    ({'source': 's', 'episodes': [], 'stray': 1}, "'stray' is not in SourceResult"),
    ({'episodes': []}, "no 'source'"),
    ({'source': 's', 'episodes': [{'name': 'e'}]}, "$.episodes[0]: no 'frames'"),
    ({'source': 3, 'episodes': []}, '$.source: 3, not str'),
])
def test_the_schema_check_fails_on_what_the_schema_does_not_say(record, problem):
    assert any(problem in m for m in mismatches(record, SourceResult))
