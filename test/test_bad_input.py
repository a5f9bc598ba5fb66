"""Bad input, tried on purpose: each gets exit 2 and one line naming the
file and the problem (or, for an audit input, a skipped line while the rest
is audited), never an internal error (exit 70) and never a silently wrong
number."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import REPO, run_cli

SCENE = REPO / 'config' / 'scenes' / 'kitchen_demo.yaml'
PROPERTIES = REPO / 'config' / 'properties' / 'safemanip.yaml'


def _one_line_error(proc, *words: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-1000:], proc.stderr[-1000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('safemanip: error: '), proc.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])


@pytest.fixture(scope='module')
def report(tmp_path_factory) -> Path:
    """A real audit report: 40 traces in which the microwave is reached into
    while closed on every fourth, open otherwise."""
    root = tmp_path_factory.mktemp('traces')
    for k in range(40):
        frames = [{'reach_in_microwave': False, 'fixture_fully_open_microwave': k % 4 != 0}] * 3 + \
                 [{'reach_in_microwave': True, 'fixture_fully_open_microwave': k % 4 != 0}] * 2
        (root / f't{k:02d}.jsonl').write_text(''.join(json.dumps(f) + '\n' for f in frames))
    out = tmp_path_factory.mktemp('audit')
    proc = run_cli('audit', str(root), '--scene', str(SCENE), '--only', 'reach_in_fixture_only_when_fully_open',
                   '--out', str(out), '--quiet', '--allow-unknown-predicates', timeout=300)
    assert proc.returncode == 0, proc.stderr
    return out / 'report.json'


NAME = 'reach_in_fixture_only_when_fully_open'


@pytest.mark.slow
def test_the_report_fixture_passes_and_fails_as_its_rate_says(report):
    assert run_cli('gate', str(report), '--max-rate', f'{NAME}=0.6').returncode == 0
    assert run_cli('gate', str(report), '--max-rate', f'{NAME}=0.1').returncode == 1


def test_a_limit_given_twice_is_an_error(report):
    """A second --max-rate for the same name used to loosen the first silently."""
    _one_line_error(run_cli('gate', str(report), '--max-rate', f'{NAME}=0.1', '--max-rate', f'{NAME}=0.9'),
                    f'--max-rate {NAME} given twice')


@pytest.mark.parametrize('edit, words', [
    (lambda row: row.update(violations=-5), 'violations -5 is not a count'),
    (lambda row: row.update(per_trigger_rate=0.01), 'is not 10 / 40'),
    (lambda row: row['clusters']['violations'].__setitem__(0, 7), 'clusters add up to'),
    (lambda row: row.update(triggers=4000), 'clusters add up to'),
    (lambda row: row.update(per_trigger_rate=float('nan')), 'per_trigger_rate nan is not 10 / 40'),
    (lambda row: row.update(unknown_share='x'), "unknown_share 'x' is not a share of frames"),
    (lambda row: row.update(rollouts=39), 'its clusters list 40 rollouts, not 39'),
])
def test_a_report_whose_numbers_contradict_each_other_is_refused(report, tmp_path, edit, words):
    data = json.loads(report.read_text())
    edit(data['properties'][NAME])
    edited = tmp_path / 'edited.json'
    edited.write_text(json.dumps(data))
    _one_line_error(run_cli('gate', str(edited), '--max-rate', f'{NAME}=0.9'), str(edited), NAME,
                    'inconsistent', words)


@pytest.mark.parametrize('edit, words', [
    (lambda data: data['categories']['enclosure_access'].update(violations=0, per_trigger_rate=0.0,
                                                                 clusters={'violations': [0] * 40,
                                                                           'triggers': [1] * 40}),
     "category 'enclosure_access': 0 violations and 40 triggers, but its properties add up to 10 and 40"),
    (lambda data: data.update(categories={}), f"property {NAME!r} is of category 'enclosure_access', which has no row"),
    (lambda data: data.update(episodes=3), 'episodes is int 3, not a list'),
])
def test_a_report_whose_categories_or_rollout_list_contradict_it_is_refused(report, tmp_path, edit, words):
    """A category gated at 0 % while its property violates 10 times in 40, or a sequential gate crashing on a
    report whose rollout list (``episodes``) is not a list (exit 70)."""
    data = json.loads(report.read_text())
    edit(data)
    edited = tmp_path / 'edited.json'
    edited.write_text(json.dumps(data))
    _one_line_error(run_cli('gate', str(edited), '--sequential', '--max-rate', 'enclosure_access=0.5'),
                    str(edited), words)


def test_a_baseline_of_other_properties_is_refused(report, tmp_path):
    """A baseline from an unrelated suite passed every row ("not in the baseline")."""
    data = json.loads(report.read_text())
    data['properties'] = {'another_property': data['properties'][NAME]}
    other = tmp_path / 'other.json'
    other.write_text(json.dumps(data))
    _one_line_error(run_cli('gate', str(report), '--baseline', str(other)), 'not comparable',
                    f'only in the candidate: {NAME}', 'only in the baseline: another_property')


def test_a_missing_input_is_skipped_and_the_rest_audited(tmp_path):
    trace = tmp_path / 'a.jsonl'
    trace.write_text('{"reach_in_microwave": true, "fixture_fully_open_microwave": false}\n')
    proc = run_cli('audit', str(tmp_path / 'nope'), str(trace), '--scene', str(SCENE), '--out', str(tmp_path / 'o'),
                   '--quiet', '--only', NAME, '--allow-unknown-predicates')
    assert proc.returncode == 0, proc.stderr
    assert 'audited 1 rollouts' in proc.stdout and f'skipped: {tmp_path / "nope"}: no such file or folder' in proc.stdout



@pytest.mark.parametrize('where', ['/proc/no_such_folder', 'a_file/out', 'a_file'])
def test_an_out_folder_that_cannot_be_made_is_one_line_exit_2(tmp_path, where):
    """``--out /proc/x`` was an internal error (FileNotFoundError from mkdir, exit 70)."""
    trace = tmp_path / 'a.jsonl'
    trace.write_text('{"reach_in_microwave": true, "fixture_fully_open_microwave": false}\n')
    (tmp_path / 'a_file').write_text('')
    out = where if where.startswith('/') else str(tmp_path / where)
    words = 'exists and is not a folder' if where == 'a_file' else 'cannot write there'
    _one_line_error(run_cli('audit', str(trace), '--scene', str(SCENE), '--out', out, '--quiet', '--only', NAME),
                    f'--out {out}: {words}')


def test_a_bench_out_folder_that_cannot_be_made_is_one_line_exit_2():
    """``bench faithfulness --out /proc/x`` ran a perception level, then ended in a traceback."""
    _one_line_error(run_cli('bench', 'faithfulness', '--out', '/proc/no_such_folder/b', timeout=60),
                    '--out /proc/no_such_folder/b: cannot write there')


def test_a_folders_broken_link_and_pipe_are_named_as_skipped_not_passed_over(tmp_path):
    """A .jsonl that was a broken link or a named pipe in an audited folder was passed over unsaid ("0
    skipped"), and with a pipe the audit blocked for ever hashing it."""
    folder = tmp_path / 'rollouts'
    folder.mkdir()
    (folder / 'ok.jsonl').write_text('{"reach_in_microwave": true, "fixture_fully_open_microwave": false}\n')
    (folder / 'broken.jsonl').symlink_to(tmp_path / 'nowhere.jsonl')
    os.mkfifo(folder / 'pipe.jsonl')
    proc = run_cli('audit', str(folder), '--scene', str(SCENE), '--out', str(tmp_path / 'o'), '--quiet', '--only',
                   NAME, '--allow-unknown-predicates', timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert 'audited 1 rollouts' in proc.stdout and '2 skipped' in proc.stdout, proc.stdout
    assert f'skipped: {folder / "broken.jsonl"}: no such file or folder (a broken link)' in proc.stdout
    assert f'skipped: {folder / "pipe.jsonl"}: not a regular file or folder (a pipe' in proc.stdout

def test_the_same_source_given_twice_is_audited_once(tmp_path, monkeypatch):
    """`audit bags bags` (or `bags/x` beside `./bags/x/`) counted every rollout twice."""
    folder = tmp_path / 'bags'
    folder.mkdir()
    (folder / 'x.jsonl').write_text('{"reach_in_microwave": true, "fixture_fully_open_microwave": false}\n')
    (tmp_path / 'link').symlink_to(folder)
    monkeypatch.chdir(tmp_path)
    proc = run_cli('audit', 'bags', 'bags', './bags/x.jsonl', str(tmp_path / 'link'), '--scene', str(SCENE),
                   '--out', 'o', '--quiet', '--only', NAME, '--allow-unknown-predicates', cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert 'audited 1 rollouts' in proc.stdout
    assert proc.stderr.count('again: audited once') == 3
    assert json.loads((tmp_path / 'o' / 'report.json').read_text())['rollouts'] == 1


def test_a_suite_that_is_not_utf8_names_the_file_and_line(tmp_path):
    suite = tmp_path / 'latin.yaml'
    suite.write_bytes(b'# properties\nproperties:\n  - name: caf\xe9\n')
    trace = tmp_path / 't.jsonl'
    trace.write_text('{"a": true}\n')
    _one_line_error(run_cli('monitor-trace', str(trace), '--properties', str(suite)), f'{suite}:3: not UTF-8 text')


def test_a_yaml_alias_bomb_is_refused_before_it_expands(tmp_path):
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip('abcdefgh', 'bcdefghi'):
        lines.append(f'{name}: &{name} [{",".join(["*" + prev] * 9)}]')
    bomb = tmp_path / 'bomb.yaml'
    bomb.write_text('\n'.join(lines) + '\n')         # 9^9 values once expanded
    trace = tmp_path / 't.jsonl'
    trace.write_text('{"a": true}\n')
    _one_line_error(run_cli('monitor-trace', str(trace), '--properties', str(bomb), timeout=60),
                    f'{bomb}:1: its aliases expand to over 100,000 values')


def test_yaml_aliases_within_the_budget_still_load():
    from safemanip_ros.spec.yamlio import loads_yaml
    assert loads_yaml('a: &x {b: [1, 2]}\nc: *x\n') == {'a': {'b': [1, 2]}, 'c': {'b': [1, 2]}}


def test_formulas_too_deep_or_too_wide_are_one_line_errors(tmp_path):
    """400 conjuncts hit a RecursionError; 64 atoms overflowed a letter (both exit 70)."""
    trace = tmp_path / 't.jsonl'
    trace.write_text(json.dumps({f'a{i}': True for i in range(400)}) + '\n')
    deep = 'G(' + ' & '.join(f'a{i}' for i in range(400)) + ')'
    _one_line_error(run_cli('check', deep, str(trace)), 'nested more than 200 levels deep', 'at position')
    wide = 'G(' + ' & '.join(f'a{i}' for i in range(64)) + ')'
    _one_line_error(run_cli('check', wide, str(trace)), 'reads 64 atoms; at most 63')
    ok = run_cli('check', 'G(' + ' & '.join(f'a{i}' for i in range(63)) + ')', str(trace), '--json')
    assert ok.returncode == 0 and json.loads(ok.stdout)['verdicts'] == ['presumably_true']


@pytest.mark.parametrize('rate', ['1e9', 'inf', 'nan', '0', '-5', '0.001'])
def test_an_absurd_frame_rate_is_refused(tmp_path, rate):
    """--rate-hz 1e9 tried to allocate 37 GiB.  The range is the live
    monitor's rate_hz parameter's (one table, safemanip_ros/settings.py)."""
    trace = tmp_path / 'a.jsonl'
    trace.write_text('{"reach_in_microwave": true}\n')
    _one_line_error(run_cli('audit', str(trace), '--scene', str(SCENE), '--out', str(tmp_path / 'o'), '--quiet',
                            '--rate-hz', rate), '--rate-hz', 'expected a finite number in [0.01, 1000]')


@pytest.mark.parametrize('args, words', [
    (['watch', '--once', '--recent', '-1'], '--recent -1: expected a finite number in [0, 10000]'),
    (['watch', '--once', '--timeout-s', 'nan'], '--timeout-s nan'),
    (['ack', '--timeout-s', '1e300'], '--timeout-s 1e+300: expected a finite number in (0, 86400]'),
    (['resume', '--wait-s', '-1'], '--wait-s -1.0: expected a finite number in [0, 86400]'),
])
def test_operator_commands_refuse_absurd_waits_and_counts(args, words):
    """Refused before any ROS set-up: ``--recent -1`` was an internal error (exit 70), ``ack --timeout-s
    1e300`` never returned, ``watch --timeout-s nan`` waited nothing and blamed the monitor."""
    proc = run_cli(*args, timeout=60)
    _one_line_error(proc, words)


def test_report_files_are_readable_as_the_umask_allows(report):
    """report.json and the rollout files were 0600 (written through mkstemp)."""
    import os
    mask = os.umask(0o022)
    os.umask(mask)
    for path in [report, *sorted((report.parent / 'episodes').glob('*.json'))[:3]]:
        assert path.stat().st_mode & 0o777 == 0o666 & ~mask, path


def _predicate_bag(path: Path, names: list[str], frames: int = 20) -> None:
    """A bag of ``/predicates`` (PredicateArray) at 20 Hz giving ``names``
    (true from the middle on)."""
    from safemanip_ros.bag import SplitBagWriter, typestore
    ts = typestore()
    T, Header = ts.types['builtin_interfaces/msg/Time'], ts.types['std_msgs/msg/Header']
    P, PA = ts.types['safemanip_ros/msg/Predicate'], ts.types['safemanip_ros/msg/PredicateArray']
    w = SplitBagWriter(path, 'mcap', split_s=100.0)
    w.add_topic('/predicates', 'safemanip_ros/msg/PredicateArray')
    for k in range(frames):
        ns = 10**9 + k * 50_000_000
        stamp = T(sec=ns // 10**9, nanosec=ns % 10**9)
        msg = PA(header=Header(stamp=stamp, frame_id=''), seq=k,
                 predicates=[P(name=n, value=k >= frames // 2, unknown=False, source='test', data_stamp=stamp)
                             for n in names])
        w.write('/predicates', ns, ts.serialize_cdr(msg, 'safemanip_ros/msg/PredicateArray'))
    w.close()


@pytest.mark.parametrize('names, words', [
    (['reach_in_microwav', 'fixture_fully_open_microwave'],
     ["unknown predicate 'reach_in_microwav': did you mean 'reach_in_microwave', which the suite reads and the "
      "bag never gives?"]),
    (['reach_in_microwave', 'fixture_fully_opne_microwave', 'arm_moving'],
     ["unknown predicate 'fixture_fully_opne_microwave': did you mean 'fixture_fully_open_microwave'"]),
])
def test_an_unknown_predicate_in_a_bag_is_an_error_naming_bag_and_topic(tmp_path, names, words):
    """A misspelt name in a recorded bag was ignored: exit 0, 0 violations."""
    _predicate_bag(tmp_path / 'bag', names)
    args = ['audit', str(tmp_path / 'bag'), '--scene', str(SCENE), '--only', NAME, '--quiet']
    proc = run_cli(*args, '--out', str(tmp_path / 'o'))
    assert proc.returncode == 3, proc.stdout + proc.stderr             # nothing could be audited
    skipped = [ln for ln in proc.stdout.splitlines() if ln.startswith('skipped:')]
    assert len(skipped) == 1 and f'{tmp_path / "bag"}: topic /predicates: ' in skipped[0], skipped
    assert all(w in skipped[0] for w in words), skipped[0]
    allowed = run_cli(*args, '--out', str(tmp_path / 'o2'), '--allow-unknown-predicates')
    assert allowed.returncode == 0 and 'audited 1 rollouts' in allowed.stdout, allowed.stderr


def test_a_recording_without_its_metadata_is_named_not_read_as_a_trace(tmp_path):
    """A bag folder whose metadata.yaml is gone (a recording that never
    finished) was audited as its writer's hidden split index, a .jsonl
    "trace" with a baffling error; now it is skipped by its own name, and
    the other bags in the folder are audited."""
    import shutil
    _predicate_bag(tmp_path / 'bags' / 'good', ['reach_in_microwave', 'fixture_fully_open_microwave'])
    shutil.copytree(tmp_path / 'bags' / 'good', tmp_path / 'bags' / 'torn')
    (tmp_path / 'bags' / 'torn' / 'metadata.yaml').unlink()
    proc = run_cli('audit', str(tmp_path / 'bags'), '--scene', str(SCENE), '--only', NAME, '--quiet',
                   '--out', str(tmp_path / 'o'))
    assert proc.returncode == 0, proc.stderr
    assert 'audited 1 rollouts' in proc.stdout
    assert f'skipped: {tmp_path / "bags" / "torn"}: a recording without metadata.yaml' in proc.stdout
    assert '.splits.jsonl' not in proc.stdout + proc.stderr


def test_a_live_recording_with_grounded_predicates_the_suite_does_not_read_is_audited(tmp_path):
    """The live stack records every predicate it grounds, not only those
    read, and other sources publish their own: kept out, not errors."""
    _predicate_bag(tmp_path / 'bag', ['reach_in_microwave', 'fixture_fully_open_microwave', 'arm_moving',
                                      'object_grasped_raw_cube', 'near_gripper_cube', 'task_done_by_checker'])
    proc = run_cli('audit', str(tmp_path / 'bag'), '--scene', str(SCENE), '--only', NAME, '--quiet',
                   '--out', str(tmp_path / 'o'))
    assert proc.returncode == 0 and 'audited 1 rollouts' in proc.stdout, proc.stdout + proc.stderr
    report = json.loads((tmp_path / 'o' / 'report.json').read_text())
    assert report['properties'][NAME]['triggers'] == 1 and report['properties'][NAME]['violations'] == 0


def test_a_live_recording_at_another_rate_is_named_not_rebuilt_wrong(tmp_path):
    """A recording of a monitor run at 100 Hz (``-p rate_hz:=100``), audited
    at the suite's 20 Hz, rebuilt its frames five periods to one: every
    window another length, other rollouts, and no word.  The bag is now
    skipped with the rate to audit it at, and audits at that rate."""
    from safemanip_ros.bag import SplitBagWriter, typestore
    ts = typestore()
    T, Header = ts.types['builtin_interfaces/msg/Time'], ts.types['std_msgs/msg/Header']
    P, PA = ts.types['safemanip_ros/msg/Predicate'], ts.types['safemanip_ros/msg/PredicateArray']
    VA = ts.types['safemanip_ros/msg/VerdictArray']
    names = ['reach_in_microwave', 'fixture_fully_open_microwave']
    w = SplitBagWriter(tmp_path / 'bag', 'mcap', split_s=100.0)
    w.add_topic('/predicates', 'safemanip_ros/msg/PredicateArray')
    w.add_topic('/verdicts', 'safemanip_ros/msg/VerdictArray')
    for k in range(50):
        ns = 10**9 + k * 10_000_000
        stamp = T(sec=ns // 10**9, nanosec=ns % 10**9)
        msg = PA(header=Header(stamp=stamp, frame_id=''), seq=k,
                 predicates=[P(name=n, value=False, unknown=False, source='test', data_stamp=stamp) for n in names])
        w.write('/predicates', ns, ts.serialize_cdr(msg, 'safemanip_ros/msg/PredicateArray'))
        w.write('/verdicts', ns + 1, ts.serialize_cdr(VA(header=Header(stamp=stamp, frame_id=''), frame=k,
                                                         episode_id='monitor-x-0001', verdicts=[]),
                                                      'safemanip_ros/msg/VerdictArray'))
    w.close()
    args = ['audit', str(tmp_path / 'bag'), '--scene', str(SCENE), '--only', NAME, '--quiet']
    proc = run_cli(*args, '--out', str(tmp_path / 'o'))
    assert proc.returncode == 3 and 'audited 0 rollouts' in proc.stdout, proc.stdout + proc.stderr
    assert ("rollout monitor-x-0001: the live monitor built its frames at 100 Hz, this audit at 20 Hz: its "
            "rollouts would not be the monitor's (audit it with --rate-hz 100)") in proc.stdout, proc.stdout
    proc = run_cli(*args, '--out', str(tmp_path / 'o2'), '--rate-hz', '100')
    assert proc.returncode == 0 and 'audited 1 rollouts (50 frames)' in proc.stdout, proc.stdout + proc.stderr


def test_a_live_recording_is_rebuilt_with_the_monitors_staleness(tmp_path):
    """The monitor's status records the staleness it held samples for (here
    1 s, samples every 0.5 s): audited with the default 0.25 s every other
    frame read unknown, other frames than the monitor's and no word.  The
    audit holds them as the monitor did, and says so."""
    from safemanip_ros.bag import SplitBagWriter, typestore
    ts = typestore()
    T, Header = ts.types['builtin_interfaces/msg/Time'], ts.types['std_msgs/msg/Header']
    P, PA = ts.types['safemanip_ros/msg/Predicate'], ts.types['safemanip_ros/msg/PredicateArray']
    VA, MS = ts.types['safemanip_ros/msg/VerdictArray'], ts.types['safemanip_ros/msg/MonitorStatus']
    names = ['reach_in_microwave', 'fixture_fully_open_microwave']
    w = SplitBagWriter(tmp_path / 'bag', 'mcap', split_s=100.0)
    for topic, msgtype in (('/predicates', 'safemanip_ros/msg/PredicateArray'),
                           ('/verdicts', 'safemanip_ros/msg/VerdictArray'), ('/status', 'safemanip_ros/msg/MonitorStatus')):
        w.add_topic(topic, msgtype)
    for k in range(60):                               # 20 Hz frames; a sample every 10th
        ns = 10**9 + k * 50_000_000
        stamp = T(sec=ns // 10**9, nanosec=ns % 10**9)
        h = Header(stamp=stamp, frame_id='')
        if k % 10 == 0:
            msg = PA(header=h, seq=k, predicates=[P(name=n, value=False, unknown=False, source='test', data_stamp=stamp)
                                                  for n in names])
            w.write('/predicates', ns, ts.serialize_cdr(msg, 'safemanip_ros/msg/PredicateArray'))
            w.write('/status', ns + 2, ts.serialize_cdr(MS(
                header=h, state='active', episode_id='monitor-x-0001', frames=k, overruns=0, max_frame_time_s=0.0,
                instances=1, violated=0, unknown_predicates=[], suite='', config='', rate_hz=20.0, staleness_s=1.0),
                'safemanip_ros/msg/MonitorStatus'))
        w.write('/verdicts', ns + 1, ts.serialize_cdr(VA(header=h, frame=k, episode_id='monitor-x-0001', verdicts=[]),
                                                      'safemanip_ros/msg/VerdictArray'))
    w.close()
    proc = run_cli('audit', str(tmp_path / 'bag'), '--scene', str(SCENE), '--only', NAME, '--quiet',
                   '--out', str(tmp_path / 'o'))
    assert proc.returncode == 0 and 'audited 1 rollouts (60 frames)' in proc.stdout, proc.stdout + proc.stderr
    # The cabinet's predicates are never given (half the frames' reads); the microwave's none held too long.
    assert '50% of its frames were decided by unknown_as (60 of 120)' in proc.stderr, proc.stderr
    [rollout] = json.loads((tmp_path / 'o' / 'report.json').read_text())['episodes']
    assert any('samples held 1 s, as the live monitor held them (not --staleness-s 0.25)' in w
               for w in rollout['warnings']), rollout['warnings']


def _raw_bag(path: Path, contacts_type: str = 'safemanip_ros/msg/ContactArray',
             bodies: tuple[str, ...] = ('robot0_link1', 'cube_main')) -> None:
    """Joint states, a TF tree and contacts between ``bodies`` (or a
    ``/contacts`` topic of another type), 10 messages each."""
    from safemanip_ros.bag import SplitBagWriter, typestore
    ts = typestore()
    T, H = ts.types['builtin_interfaces/msg/Time'], ts.types['std_msgs/msg/Header']
    JS, TFM, TSt, Tr = (ts.types[n] for n in ('sensor_msgs/msg/JointState', 'tf2_msgs/msg/TFMessage',
                                               'geometry_msgs/msg/TransformStamped', 'geometry_msgs/msg/Transform'))
    V3, Q, P = (ts.types[n] for n in ('geometry_msgs/msg/Vector3', 'geometry_msgs/msg/Quaternion',
                                      'geometry_msgs/msg/Point'))
    C, CA, S = (ts.types[n] for n in ('safemanip_ros/msg/Contact', 'safemanip_ros/msg/ContactArray',
                                      'std_msgs/msg/String'))
    import numpy as np
    w = SplitBagWriter(path, 'mcap', split_s=100.0)
    w.add_topic('/joint_states', 'sensor_msgs/msg/JointState')
    w.add_topic('/tf', 'tf2_msgs/msg/TFMessage')
    w.add_topic('/contacts', contacts_type)
    for k in range(10):
        ns = 10**9 + k * 50_000_000
        h = H(stamp=T(sec=ns // 10**9, nanosec=ns % 10**9), frame_id='')
        w.write('/joint_states', ns, ts.serialize_cdr(JS(header=h, name=['robot0_joint1', 'gripper0_finger_joint1'],
                                                        position=np.array([0.1 * k, 0.02]), velocity=np.zeros(0),
                                                        effort=np.zeros(0)), 'sensor_msgs/msg/JointState'))
        tf = TSt(header=H(stamp=h.stamp, frame_id='world'), child_frame_id='robot0_eef',
                 transform=Tr(translation=V3(x=0.0, y=0.0, z=1.0), rotation=Q(x=0.0, y=0.0, z=0.0, w=1.0)))
        w.write('/tf', ns, ts.serialize_cdr(TFM(transforms=[tf]), 'tf2_msgs/msg/TFMessage'))
        if contacts_type == 'std_msgs/msg/String':
            w.write('/contacts', ns, ts.serialize_cdr(S(data='a foreign contact message'), contacts_type))
        else:
            pairs = list(zip(bodies[::2], bodies[1::2]))
            msg = CA(header=h, contacts=[C(body1=a, body2=b, position=P(x=0.0, y=0.0, z=0.0),
                                           normal=V3(x=0.0, y=0.0, z=1.0), normal_force_n=3.0, depth_m=0.0)
                                         for a, b in pairs])
            w.write('/contacts', ns, ts.serialize_cdr(msg, contacts_type))
    w.close()


def test_config_init_writes_names_that_load_back_exactly(tmp_path):
    """Body names with YAML syntax became other values (``a: b`` a mapping, ``true`` a boolean)."""
    import yaml
    odd = ('robot0_link1', 'a: b', 'true', '[x]', 'null', '1e3', 'plate #2', 'x,y')
    _raw_bag(tmp_path / 'bag', bodies=odd)
    out = tmp_path / 'draft.yaml'
    proc = run_cli('config', 'init', '--from-bag', str(tmp_path / 'bag'), '--out', str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = yaml.safe_load(out.read_text())
    named = set(doc['contacts']['robot_bodies']) | {b for e in doc['entities'].values() for b in e['bodies']}
    assert set(odd) <= named, (named, out.read_text())


def test_a_contacts_topic_of_another_type_is_named_not_a_crash(tmp_path):
    """doctor and config init crashed on a bag whose contacts topic has a
    foreign type (Gazebo's, say)."""
    _raw_bag(tmp_path / 'bag', contacts_type='std_msgs/msg/String')
    config = REPO / 'config' / 'robots' / 'robosuite_lift.yaml'
    doctor = run_cli('doctor', '--config', str(config), str(tmp_path / 'bag'))
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    assert "topic '/contacts' (contacts): has type std_msgs/msg/String, not safemanip_ros/msg/ContactArray" \
        in doctor.stdout, doctor.stdout
    init = run_cli('config', 'init', '--from-bag', str(tmp_path / 'bag'), '--out', str(tmp_path / 'd.yaml'))
    assert init.returncode == 0, init.stdout + init.stderr


LIFT = REPO / 'config' / 'robots' / 'robosuite_lift.yaml'


@pytest.mark.parametrize('old, new, words', [
    ('support_gap_m: 0.01', 'support_gap_m: -0.01', 'thresholds.support_gap_m: must be >= 0.0'),
    ('slip_m: 0.03', 'slip_m: -1', 'thresholds.slip_m: must be >= 0.0'),
    ('min_finger_bodies: 2', 'min_finger_bodies: 9', 'min_finger_bodies: 9 exceeds the'),
    ('gripper_frame: gripper0_right_eef', "gripper_frame: ''", 'gripper_frame: must name a frame'),
    ('  gripper: [', '  gripper: [robot0_joint1, ', "['robot0_joint1'] are in both arm and gripper"),
])
def test_impossible_robot_configurations_are_refused(tmp_path, old, new, words):
    """Negative gaps and limits, more finger bodies required than configured,
    a joint in both arm and gripper, an empty gripper frame: all loaded."""
    text = LIFT.read_text()
    assert old in text
    bad = tmp_path / 'robot.yaml'
    bad.write_text(text.replace(old, new, 1))
    _one_line_error(run_cli('predicates', '--config', str(bad)), str(bad), words)


PANDA = REPO / 'config' / 'robots' / 'panda_demo.yaml'


@pytest.mark.parametrize('old, new, words', [
    ('robot0_joint1: 2.175', 'robot0_joint1: -2.175', 'velocity_limits_rad_s.robot0_joint1: must be > 0, got -2.175'),
    ('support_half_extents_m: [0.3, 0.15]', 'support_half_extents_m: [0.3, 0]',
     'entities.shelf.support_half_extents_m[1]: must be > 0, got 0'),
    ('frame: chicken_main', "frame: ' '", 'entities.chicken.frame: must name a frame'),
    ('bodies: [chicken_g0]', "bodies: ['']", 'entities.chicken.bodies[0]: must be a name'),
    ('[gripper0_eef, mug_main, 0.05]', '[gripper0_eef, mug_main, .nan]',
     'tf.near.gripper_mug: expected [frame_a, frame_b, distance_m]'),
    ('[gripper0_eef, mug_main, 0.05]', '[gripper0_eef, mug_main, -0.05]', 'its distance must be > 0 m, got -0.05'),
    ('[gripper0_eef, mug_main, 0.05]', '[~, mug_main, 0.05]', 'tf.near.gripper_mug: expected [frame_a'),
    ('[-0.15, -0.15, 0.0], [0.15, 0.15, 0.25]', '[0.15, -0.15, 0.0], [-0.15, 0.15, 0.25]',
     'tf.inside.mug_in_microwave: its minimum corner [0.15, -0.15, 0.0] must lie below its maximum'),
    ('[-0.15, -0.15, 0.0], [0.15, 0.15, 0.25]', '[-0.15, x, 0.0], [0.15, 0.15, 0.25]', 'finite numbers'),
    ('rect_px: [40, 300, 200, 420]', 'rect_px: [200, 300, 40, 420]', 'camera.regions.shelf_left: rect_px'),
    ('hsv_low: [0, 120, 70]', 'hsv_low: [-1, 120, 70]', "hsv_low [-1, 120, 70] is outside OpenCV's HSV range"),
    ('hsv_high: [10, 255, 255]', 'hsv_high: [10, 256, 255]', "hsv_high [10, 256, 255] is outside"),
    ('hsv_low: [0, 120, 70]', 'hsv_low: [20, 120, 70]', 'hsv_low [20, 120, 70] must not exceed hsv_high'),
    ('min_fraction: 0.2', 'min_fraction: -1', 'min_fraction -1 must be a share of the region'),
])
def test_impossible_geometry_and_camera_settings_are_refused(tmp_path, old, new, words):
    """Loaded before: negative speed limits and extents, empty frame and body names, a NaN or negative
    "near" distance (str(None) became a frame named 'None'), inside-out boxes, pixel rectangles and HSV bounds
    that select nothing or crash cv2.inRange at the first image, a min_fraction that is always met."""
    text = PANDA.read_text()
    assert old in text
    bad = tmp_path / 'robot.yaml'
    bad.write_text(text.replace(old, new, 1))
    _one_line_error(run_cli('predicates', '--config', str(bad)), str(bad), words)


def test_windows_past_the_state_budget_are_refused_not_a_hang(tmp_path):
    """`G(a -> F[40,60] b)` grew to 1.6 GB in 15 s and hung monitor-trace,
    audit and run at start-up; `G[0,1000000000] a` likewise."""
    huge = run_cli('compile', 'G[0,1000000000] a', timeout=60)
    _one_line_error(huge, 'the automaton needs more than 500,000 states (1,000,000,000 reached after 0 steps')
    late = run_cli('compile', 'G(a -> F[40,60] b)', '--max-states', '20000', timeout=120)
    _one_line_error(late, 'more than 20,000 states', 'starts after frame 0', '--max-states')
    # Refused as soon as its growth shows it, not after filling memory up to the budget (was 7.8 s, 900 MB).
    early = run_cli('compile', 'G(a -> F[40,60] b)', timeout=120)
    _one_line_error(early, 'more than 500,000 states', 'growing to about', 'by the end of its longest delay')
    steps = int(early.stderr.split(' reached after ')[1].split()[0])
    assert steps <= 12, early.stderr
    fine = run_cli('compile', 'G(a -> F[40,60] b)', '--max-states', '0')
    _one_line_error(fine, '--max-states 0: expected at least 1')
    suite = tmp_path / 'late.yaml'
    suite.write_text('suite: late\nrate_hz: 20\npredicates:\n  a: {description: a}\n  b: {description: b}\n'
                     'properties:\n  - name: late\n    description: late\n    category: action_onset\n'
                     '    formula: "G(a -> F[40,60] b)"\n    trigger: a\n    recovery: "F b"\n    severity: error\n'
                     '    response: pause\n')
    trace = tmp_path / 't.jsonl'
    trace.write_text('{"a": true, "b": false}\n')
    _one_line_error(run_cli('monitor-trace', str(trace), '--properties', str(suite), timeout=300),
                    'late: the automaton needs more than 500,000 states')
