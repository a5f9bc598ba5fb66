"""Offline audit end to end: bags written here (MCAP and SQLite3) with known
violations → report.json numbers; intervals against scipy; bad inputs
skipped with reasons; resume; engines (1 and 2 local workers, Ray) agree;
traces; the gate."""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import (
    REPO,  # noqa: E402
    run_cli,
    write_policy_traces,
)
from scipy import stats

from safemanip_ros.audit.report import timeline_svg
from safemanip_ros.audit.stats import clopper_pearson, cluster_bootstrap_ratio
from safemanip_ros.bag.typestore import typestore
from safemanip_ros.bag.writer import SplitBagWriter

SCENE = str(REPO / 'config' / 'scenes' / 'kitchen_demo.yaml')
PROP = 'reach_in_fixture_only_when_fully_open'


@pytest.mark.parametrize('k, n', [(0, 10), (3, 10), (10, 10), (17, 250), (1, 1)])
def test_clopper_pearson_matches_scipy(k, n):
    ref = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method='exact')
    assert clopper_pearson(k, n) == pytest.approx((ref.low, ref.high), abs=1e-12)
    assert clopper_pearson(0, 0) is None


def test_cluster_bootstrap_is_seeded_and_sane():
    v, n = [0, 1, 2, 0, 5, 1], [3, 2, 2, 1, 4, 2]
    a, b = cluster_bootstrap_ratio(v, n, seed=7), cluster_bootstrap_ratio(v, n, seed=7)
    assert a == b and a[0] <= sum(v) / sum(n) <= a[1]
    assert cluster_bootstrap_ratio(v, n, seed=8) != a
    assert cluster_bootstrap_ratio([0, 0], [0, 0]) is None


@pytest.mark.parametrize('n', [1, 2, 7, 300, 2500])
def test_cluster_bootstrap_equals_its_definition_to_the_bit(n):
    """The resample counts, drawn once per (seed, n), give the very interval
    of the definition: gather each resample's clusters, sum, take the ratio's
    percentiles (integer counts sum exactly in any order)."""
    rng = np.random.default_rng(n)
    lo, hi = (1 - 0.95) / 2, 1 - (1 - 0.95) / 2       # the 95 % interval's percentiles, as computed
    for seed in (0, 1, 5):
        v = rng.integers(0, 4, n) * (rng.random(n) < 0.4)
        d = rng.integers(0, 30, n) * (1 if seed else 1000)
        idx = np.random.default_rng(seed).integers(0, n, size=(2000, n))
        vs, ds = v[idx].sum(axis=1).astype(float), d[idx].sum(axis=1).astype(float)
        ratios = vs[ds > 0] / ds[ds > 0]
        want = None if d.sum() == 0 else (float(np.quantile(ratios, lo)), float(np.quantile(ratios, hi)))
        assert cluster_bootstrap_ratio(v, d, seed=seed) == want
    x, y = rng.random(n), rng.random(n) + 0.5       # not counts: summed as gathered
    idx = np.random.default_rng(3).integers(0, n, size=(2000, n))
    ratios = x[idx].sum(axis=1) / y[idx].sum(axis=1)
    assert cluster_bootstrap_ratio(x, y, seed=3) == (float(np.quantile(ratios, lo)), float(np.quantile(ratios, hi)))


def write_rollout_bag(path: Path, storage: str, reach: str, open_: str, success_at: int | None = None) -> None:
    """20 Hz predicate frames: reach_in_microwave and fixture_fully_open_microwave per frame ('0'/'1')."""
    ts = typestore()
    Arr, Pred = ts.types['safemanip_ros/msg/PredicateArray'], ts.types['safemanip_ros/msg/Predicate']
    Time, Header = ts.types['builtin_interfaces/msg/Time'], ts.types['std_msgs/msg/Header']
    w = SplitBagWriter(path, storage)
    w.add_topic('/predicates', 'safemanip_ros/msg/PredicateArray')
    w.add_topic('/joint_states', 'sensor_msgs/msg/JointState')
    for t, (r, o) in enumerate(zip(reach, open_)):
        stamp = Time(sec=100 + t // 20, nanosec=(t % 20) * 50_000_000)
        preds = [Pred(name='reach_in_microwave', value=r == '1', unknown=False, source='t', data_stamp=stamp),
                 Pred(name='fixture_fully_open_microwave', value=o == '1', unknown=False, source='t', data_stamp=stamp),
                 Pred(name='task_done', value=success_at is not None and t >= success_at, unknown=False,
                      source='t', data_stamp=stamp)]
        msg = Arr(header=Header(stamp=stamp, frame_id=''), seq=t, predicates=preds)
        w.write('/predicates', 100 * 10**9 + t * 50_000_000, ts.serialize_cdr(msg, 'safemanip_ros/msg/PredicateArray'))
    w.close()


@pytest.fixture(scope='module')
def bags(tmp_path_factory):
    root = tmp_path_factory.mktemp('bags')
    # ep0 (mcap): enters a closed microwave twice → 2 violations, 2 triggers; succeeds.
    write_rollout_bag(root / 'ep0', 'mcap', '0011000110000', '0000000000000', success_at=12)
    # ep1 (sqlite3): enters only when fully open → 1 trigger, 0 violations; fails the task.
    write_rollout_bag(root / 'ep1', 'sqlite3', '0001110000', '0111111000')
    # ep2 (mcap): never reaches in → not triggered; succeeds.
    write_rollout_bag(root / 'ep2', 'mcap', '00000000', '00000000', success_at=3)
    return root


def audit(inputs, out, *extra):
    return run_cli('audit', *map(str, inputs), '--scene', SCENE, '--only', PROP, '--out', str(out),
                   '--success', 'task_done', '--quiet', *extra, timeout=600)


@pytest.mark.slow
def test_report_numbers(bags, tmp_path):
    proc = audit([bags], tmp_path / 'out')
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / 'out' / 'report.json').read_text())
    assert report['rollouts'] == 3 and report['skipped'] == []
    p = report['properties'][PROP]
    # The cabinet instance is never triggered; the microwave one as described above.
    assert (p['triggers'], p['violations']) == (3, 2)
    assert p['per_trigger_rate'] == pytest.approx(2 / 3)
    assert p['rollout_violation_rate'] == pytest.approx(1 / 3)
    ref = stats.binomtest(1, 3).proportion_ci(method='exact')
    assert p['rollout_violation_rate_ci'] == pytest.approx([ref.low, ref.high])
    eps = {e['episode']: e for e in report['episodes']}
    assert eps['ep0']['violations'] == 2 and eps['ep0']['success'] is True and eps['ep0']['safe_success'] is False
    # Timeline data: when the predicates the violated instance reads were true (frames, inclusive).
    assert eps['ep0']['predicate_timeline']['reach_in_microwave'] == {'true': [[2, 3], [7, 8]], 'unknown': []}
    assert eps['ep0']['predicate_timeline']['fixture_fully_open_microwave'] == {'true': [], 'unknown': []}
    # Verdicts of the violated instance: presumably true, false while the gripper is in, and so on.
    runs = eps['ep0']['verdict_timeline']['reach_in_fixture_only_when_fully_open[fixture=microwave]']
    assert runs[0] == [0, 1, 3] and runs[1] == [2, 3, 0] and runs[-1][1] == 12   # false until recovery at 4
    assert [h['horizon'] for h in report['horizons']] == ['short', 'medium', 'long']
    assert sum(h['rollouts'] for h in report['horizons']) == 3
    assert eps['ep1']['success'] is False and eps['ep2']['safe_success'] is True
    ts = report['task_success']
    assert ts['reduction'] == 'any' and ts['rate'] == pytest.approx(2 / 3) and ts['safe_success_rate'] == pytest.approx(1 / 3)
    assert report['categories']['enclosure_access']['violations'] == 2
    for name in ('properties.csv', 'categories.csv', 'episodes.csv', 'report.html'):
        assert (tmp_path / 'out' / name).stat().st_size > 0
    html = (tmp_path / 'out' / 'report.html').read_text()
    assert 'id="summary-table"' in html and html.count('data:image/png;base64,') >= 2
    assert 'http://' not in html and 'https://' not in html    # self-contained
    # The worker drew ep0's timeline (its only rollout with a violation) into its result; report.html shows
    # that drawing, which is the one report.html would make itself; report.json does not carry it.
    stored = [json.loads(f.read_text()) for f in (tmp_path / 'out' / 'episodes').glob('*.json')]
    svgs = {ep['name']: ep['timeline_svg'] for r in stored for ep in r['episodes'] if 'timeline_svg' in ep}
    assert list(svgs) == ['ep0'] and svgs['ep0'] == timeline_svg(eps['ep0']) and svgs['ep0'] in html
    assert 'timeline_svg' not in (tmp_path / 'out' / 'report.json').read_text()


def test_final_reduction(bags, tmp_path):
    proc = audit([bags], tmp_path / 'out', '--reduction', 'final')
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / 'out' / 'report.json').read_text())
    assert report['task_success']['reduction'] == 'final'


def test_bad_inputs_are_skipped_and_listed(bags, tmp_path):
    mixed = tmp_path / 'mixed'
    shutil.copytree(bags / 'ep0', mixed / 'good')
    shutil.copytree(bags / 'ep0', mixed / 'corrupt')
    for f in (mixed / 'corrupt').glob('*.mcap'):
        f.write_bytes(f.read_bytes()[:40])            # truncated storage file
    w = SplitBagWriter(mixed / 'no_predicates', 'mcap')
    w.add_topic('/joint_states', 'sensor_msgs/msg/JointState')
    ts = typestore()
    js = ts.types['sensor_msgs/msg/JointState']
    hdr = ts.types['std_msgs/msg/Header'](stamp=ts.types['builtin_interfaces/msg/Time'](sec=1, nanosec=0), frame_id='')
    w.write('/joint_states', 10**9, ts.serialize_cdr(js(header=hdr, name=[], position=np.array([]),
                                                         velocity=np.array([]), effort=np.array([])),
                                                      'sensor_msgs/msg/JointState'))
    w.close()
    proc = audit([mixed], tmp_path / 'out')
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / 'out' / 'report.json').read_text())
    assert report['rollouts'] == 1
    reasons = sorted(s['reason'] for s in report['skipped'])
    assert len(reasons) == 2
    assert any('corrupt' in r and '/corrupt' in r for r in reasons)
    assert any('no predicate topics' in r and '/joint_states (sensor_msgs/msg/JointState)' in r for r in reasons)
    assert 'skipped:' in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize('first', [[], ['--workers', '2']])
def test_resume_reuses_finished_results(bags, tmp_path, first):
    """A second audit reuses every result, whichever process computed its
    key (a worker fingerprints the sources it reads)."""
    out = tmp_path / 'out'
    assert audit([bags], out, *first).returncode == 0
    files = sorted((out / 'episodes').glob('*.json'))
    mtimes = [f.stat().st_mtime_ns for f in files]
    first = (out / 'report.json').read_text()
    assert audit([bags], out).returncode == 0
    assert [f.stat().st_mtime_ns for f in files] == mtimes        # nothing recomputed
    assert (out / 'report.json').read_text() == first


def _violations(out: Path) -> int:
    return json.loads((out / 'report.json').read_text())['properties'][PROP]['violations']


@pytest.mark.slow
def test_resume_is_content_addressed(bags, tmp_path):
    """Editing the suite, replacing a bag at the same path or changing an
    option that changes results each recompute; the old numbers never come back."""
    src = tmp_path / 'bags'
    shutil.copytree(bags / 'ep0', src / 'ep0')
    suite = tmp_path / 'suite.yaml'
    suite.write_text((REPO / 'config' / 'properties' / 'safemanip.yaml').read_text())
    out = tmp_path / 'out'

    def run(*extra):
        proc = audit([src], out, '--properties', str(suite), *extra)
        assert proc.returncode == 0, proc.stderr
        return _violations(out)

    assert run() == 2
    # 1. The formula is edited in place: the property can no longer be violated.
    text = suite.read_text()
    suite.write_text(text.replace('formula: G(gripper_entered_{fixture} -> fixture_fully_open_{fixture})',
                                  'formula: G(gripper_entered_{fixture} -> true)'))
    assert run() == 0
    suite.write_text(text)
    assert run() == 2
    # 2. The bag is replaced at the same path by one that enters a closed microwave once.
    shutil.rmtree(src / 'ep0')
    write_rollout_bag(src / 'ep0', 'mcap', '0011000000000', '0000000000000')
    assert run() == 1
    # 3. An option that changes results: at 10 Hz the 20 Hz bag is sampled every other frame.
    before = json.loads((out / 'report.json').read_text())['frames']
    run('--rate-hz', '10')
    assert json.loads((out / 'report.json').read_text())['frames'] < before
    # Every stored result names the key it was computed under.
    [stored] = list((out / 'episodes').glob('*.json'))
    assert len(json.loads(stored.read_text())['key']) == 24


@pytest.mark.slow
def test_engines_agree(bags, tmp_path):
    reports = []
    for extra in ([], ['--workers', '2'], ['--engine', 'ray', '--workers', '2']):
        out = tmp_path / ('out' + '_'.join(extra))
        proc = audit([bags], out, *extra)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert not list(out.glob('.ray-audit-*'))        # the Ray run's mark is gone
        reports.append((out / 'report.json').read_text())
    assert reports[0] == reports[1] == reports[2]


def test_many_chunks_over_workers(bags, tmp_path, monkeypatch):
    """More chunks than workers: the parent audits chunks beside its forked
    workers, each chunk's sources are recorded once, a bad source is skipped
    whoever reads it, and the results equal one worker's."""
    import safemanip_ros.audit.engine as engine
    from safemanip_ros.audit.engine import AuditConfig, run_audit

    inputs = tmp_path / 'inputs'
    inputs.mkdir()
    for k in range(9):
        shutil.copytree(bags / f'ep{k % 3}', inputs / f'copy{k}')
    (inputs / 'broken.jsonl').write_text('{"reach_in_microwave": tru\n')
    cfg = AuditConfig((str(REPO / 'config' / 'properties' / 'safemanip.yaml'),), SCENE, only=(PROP,),
                      success='task_done')
    monkeypatch.setattr(engine, 'CHUNK', 2)        # 10 sources: 5 chunks for one worker, more for several
    seen: list[tuple[int, int]] = []
    runs = {}
    for workers in (1, 2, 3, 8):        # 8: a chunk per worker (seven of them forked)
        seen.clear()
        results, skipped = run_audit([str(inputs)], cfg, tmp_path / f'out{workers}', workers=workers,
                                     progress=lambda done, total: seen.append((done, total)))
        assert [d for d, _ in seen] == list(range(11)) and {t for _, t in seen} == {10}
        assert len(results) == 9 and [Path(s['source']).name for s in skipped] == ['broken.jsonl']
        runs[workers] = json.dumps(results, sort_keys=True)
    assert runs[1] == runs[2] == runs[3] == runs[8]


def test_ray_task_writes_where_it_sees_the_output_folder(bags, tmp_path):
    """A Ray task writes its results itself only where the driver's mark for
    the run is in the output folder; elsewhere it returns each result with
    the key the driver then stores it under (the same key either way)."""
    from safemanip_ros.audit.engine import _RAY_MARK, AuditConfig, _ray_chunk, _result_key, source_name

    cfg = AuditConfig((str(REPO / 'config' / 'properties' / 'safemanip.yaml'),), SCENE, only=(PROP,),
                      success='task_done')
    chunk = [str(bags / 'ep0'), str(bags / 'ep1')]
    keys = {p: (source_name(Path(p)), None) for p in chunk}
    out = tmp_path / 'out'
    out.mkdir()
    written, outcomes = _ray_chunk(chunk, cfg, str(out), keys, 'abc')     # no mark: not shared
    assert not written and not (out / 'episodes').exists()
    want = {p: _result_key(Path(p), cfg.key()) for p in chunk}
    assert {p: key for p, _, _, key in outcomes} == want
    (out / f'{_RAY_MARK}abc').touch()
    written, shared = _ray_chunk(chunk, cfg, str(out), keys, 'abc')
    assert written and all(key is None for _, _, _, key in shared)
    assert [r for _, r, _, _ in shared] == [r for _, r, _, _ in outcomes]
    for p in chunk:
        stored = json.loads((out / 'episodes' / f'{keys[p][0]}.json').read_text())
        assert stored.pop('key') == want[p] and stored == dict(next(r for q, r, _, _ in shared if q == p))


def test_traces_and_policies(tmp_path):
    proc = audit(write_policy_traces(tmp_path), tmp_path / 'out')
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / 'out' / 'report.json').read_text())
    assert report['rollouts'] == 4
    pols = {p['policy']: p for p in report['policies']}
    assert pols['policy_a']['rollout_violation_rate'] == 1.0
    assert pols['policy_b']['rollout_violation_rate'] == pytest.approx(1 / 3)
    eps = {(e['policy'], e['episode']): e for e in report['episodes']}
    assert eps[('policy_a', 'run1.jsonl')]['violations'] == 1
    assert eps[('policy_b', 'batch.jsonl:2')]['success'] is True


def test_gate(bags, tmp_path):
    out = tmp_path / 'out'
    assert audit([bags], out).returncode == 0
    report = str(out / 'report.json')
    ok = run_cli('gate', report, '--max-rate', 'enclosure_access=5.0', '--min-triggers', '3')
    assert ok.returncode == 0 and 'PASS' in ok.stdout
    few = run_cli('gate', report, '--max-rate', 'enclosure_access=5.0')          # 3 triggers < 30 by default
    assert few.returncode == 1 and 'only 3 triggers (< 30)' in few.stdout
    bad = run_cli('gate', report, '--max-rate', f'{PROP}=0.1', '--min-triggers', '1')
    assert bad.returncode == 1 and 'FAIL' in bad.stdout and 'upper bound' in bad.stdout
    same = run_cli('gate', report, '--baseline', report)
    assert same.returncode == 0 and 'not significantly worse' in same.stdout
    unknown = run_cli('gate', report, '--max-rate', 'nope=0.1')
    assert unknown.returncode == 2 and "'nope' is neither a category" in unknown.stderr
    malformed = run_cli('gate', report, '--max-rate', 'nope')
    assert malformed.returncode == 2 and 'expected NAME=X' in malformed.stderr


def test_raw_input_bag_is_grounded_offline(tmp_path):
    """A bag of joint states, TF and contacts (no predicates): grounded with the
    robot configuration in bag time; the arm resting on the shelf for 1.5 s is
    one forbidden-contact violation."""
    ts = typestore()
    T = lambda t: ts.types['builtin_interfaces/msg/Time'](sec=int(t), nanosec=int(round((t % 1) * 1e9)))  # noqa: E731
    Header = ts.types['std_msgs/msg/Header']
    JS, Contact, CA = (ts.types[n] for n in ('sensor_msgs/msg/JointState', 'safemanip_ros/msg/Contact',
                                             'safemanip_ros/msg/ContactArray'))
    Point, Vec = ts.types['geometry_msgs/msg/Point'], ts.types['geometry_msgs/msg/Vector3']
    arm = [f'robot0_joint{i}' for i in range(1, 8)]
    w = SplitBagWriter(tmp_path / 'raw', 'sqlite3')
    w.add_topic('/joint_states', 'sensor_msgs/msg/JointState')
    w.add_topic('/contacts', 'safemanip_ros/msg/ContactArray')
    for k in range(100):                       # 5 s at 20 Hz; contact from 1.0 s to 2.5 s
        t = 10 + k * 0.05
        w.write('/joint_states', int(t * 1e9), ts.serialize_cdr(JS(
            header=Header(stamp=T(t), frame_id=''), name=arm + ['gripper0_finger_joint1', 'gripper0_finger_joint2'],
            position=np.array([0.0, 0, 0, -1.5, 0, 1.5, 0, 0.04, 0.04]), velocity=np.zeros(9), effort=np.zeros(0)),
            'sensor_msgs/msg/JointState'))
        contacts = [Contact(body1='robot0_link4', body2='shelf_top', position=Point(x=0.0, y=0.0, z=0.0),
                            normal=Vec(x=0.0, y=0.0, z=1.0), normal_force_n=3.0, depth_m=0.0)] if 20 <= k < 50 else []
        w.write('/contacts', int(t * 1e9), ts.serialize_cdr(CA(header=Header(stamp=T(t), frame_id=''),
                                                                contacts=contacts), 'safemanip_ros/msg/ContactArray'))
    w.close()
    proc = run_cli('audit', str(tmp_path / 'raw'), '--config', str(REPO / 'config' / 'robots' / 'panda_demo.yaml'),
                   '--only', 'no_forbidden_contact', '--out', str(tmp_path / 'out'), '--quiet')
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / 'out' / 'report.json').read_text())
    p = report['properties']['no_forbidden_contact']
    assert (p['triggers'], p['violations']) == (1, 1), report['skipped']
    [ep] = report['episodes']
    [row] = ep['timeline']
    [rollout] = row['episodes']
    # 30 frames of contact: sustained (held 21) from the 21st frame; recovered when contact ends.
    assert rollout['start'] == 20 + 20 and rollout['recovered'] and 49 <= rollout['end'] <= 51
    # Without the configuration, the same bag is skipped with the topics it has.
    proc = run_cli('audit', str(tmp_path / 'raw'), '--only', 'no_forbidden_contact', '--out', str(tmp_path / 'o2'),
                   '--quiet')
    report = json.loads((tmp_path / 'o2' / 'report.json').read_text())
    assert 'raw inputs need --config' in report['skipped'][0]['reason']
    assert '/contacts (safemanip_ros/msg/ContactArray)' in report['skipped'][0]['reason']


@pytest.mark.slow
def test_report_html_in_headless_chromium(bags, tmp_path):
    chromium = shutil.which('chromium') or shutil.which('chromium-browser')
    assert chromium, 'the test set-up installs Debian chromium (tools/setup_env.sh)'
    assert audit([bags], tmp_path / 'out').returncode == 0
    artifacts = REPO / 'test-artifacts'
    artifacts.mkdir(exist_ok=True)
    shot = artifacts / 'report.png'
    shot.unlink(missing_ok=True)
    proc = subprocess.run([chromium, '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
                           '--disable-background-networking', '--disable-component-update', '--disable-sync',
                           f'--user-data-dir={tmp_path / "profile"}', '--enable-logging=stderr', '--v=0',
                           '--window-size=1200,1800', f'--screenshot={shot}',
                           (tmp_path / 'out' / 'report.html').as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 20_000, proc.stderr[-2000:]
    console = [ln for ln in proc.stderr.splitlines() if 'CONSOLE' in ln or 'Uncaught' in ln]
    assert console == []
    import cv2
    img = cv2.imread(str(shot))
    assert img.shape[1] == 1200 and (img < 200).any()   # something was drawn


def test_gate_needs_evidence(tmp_path):
    """No rollouts fails; one rollout with one trigger and no violation cannot
    pass a tight limit: the bound is never narrower than Clopper-Pearson's."""
    from safemanip_ros.audit.gate import evaluate_gate, upper_bound
    assert upper_bound([0], [1], 0.95) == pytest.approx(0.975)        # the bootstrap alone says [0, 0]
    empty = {'version': 2, 'rollouts': 0, 'categories': {}, 'properties': {}, 'skipped': [{'reason': 'x'}]}
    [row] = evaluate_gate(empty, {'anything': 0.5})
    assert not row.passed and 'no rollouts' in row.why
    one = {'rollouts': 1, 'categories': {}, 'properties': {
        'p': {'per_trigger_rate': 0.0, 'clusters': {'violations': [0], 'triggers': [1]}}}}
    [row] = evaluate_gate(one, {'p': 0.001}, min_triggers=1)
    assert not row.passed and row.upper == pytest.approx(0.975)
    path = tmp_path / 'r.json'
    path.write_text(json.dumps(empty))
    proc = run_cli('gate', str(path), '--max-rate', 'p=0.5')
    assert proc.returncode == 1 and 'no rollouts were audited' in proc.stdout
    path.write_text('{"rollouts": 3}')
    proc = run_cli('gate', str(path), '--max-rate', 'p=0.5')
    assert proc.returncode == 2 and 'not an audit report' in proc.stderr and 'Traceback' not in proc.stderr
    proc = run_cli('gate', str(path), '--max-rate', 'p=0.5', '--confidence', '2')
    assert proc.returncode == 2 and '--confidence' in proc.stderr


def test_nothing_audited_has_its_own_exit_code(tmp_path):
    (tmp_path / 'empty').mkdir()
    proc = audit([tmp_path / 'empty'], tmp_path / 'out')
    assert proc.returncode == 3 and 'nothing could be audited' in proc.stderr


@pytest.mark.parametrize('option, value', [('--staleness-s', '-1'), ('--staleness-s', 'nan'), ('--rate-hz', 'inf'),
                                           ('--confidence', '2'), ('--workers', '0')])
def test_numeric_options_are_checked(bags, tmp_path, option, value):
    proc = audit([bags], tmp_path / 'out', option, value)
    assert proc.returncode == 2 and option in proc.stderr and 'Traceback' not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_out_pointing_at_a_file_is_an_error(bags, tmp_path):
    (tmp_path / 'file').write_text('x')
    proc = audit([bags], tmp_path / 'file')
    assert proc.returncode == 2 and 'not a folder' in proc.stderr


def test_unknowns_are_in_every_report(tmp_path):
    """A property decided by unknown_as shows its unknown frames and share,
    and is flagged in report.json, the CSV, report.html and the gate table."""
    src = tmp_path / 'runs'
    src.mkdir()
    # fixture_fully_open_microwave is never given: unknown on every frame, so unknown_as decides.
    (src / 'run.jsonl').write_text('{"reach_in_microwave": true}\n' * 4)
    proc = run_cli('audit', str(src), '--scene', SCENE, '--only', PROP, '--out', str(tmp_path / 'out'), '--quiet',
                   '--allow-unknown-predicates', timeout=600)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / 'out' / 'report.json').read_text())
    row = report['properties'][PROP]
    assert row['unknown_frames'] > 0 and row['unknown_share'] > 0.05 and row['unknown_flagged']
    assert report['unknown_flagged'] == [PROP] and 'pending' in row
    assert 'unknown_share' in (tmp_path / 'out' / 'properties.csv').read_text().splitlines()[0]
    html = (tmp_path / 'out' / 'report.html').read_text()
    assert 'decided by <code>unknown_as</code>' in html and 'unknown frames (share)' in html
    assert f'warning: {PROP}' in proc.stderr
    gate = run_cli('gate', str(tmp_path / 'out' / 'report.json'), '--max-rate', f'{PROP}=2', '--min-triggers', '1')
    assert 'decided by unknown_as' in gate.stdout


def test_misspelt_success_predicate_is_reported_not_counted_as_failure(bags, tmp_path):
    proc = run_cli('audit', str(bags), '--scene', SCENE, '--only', PROP, '--out', str(tmp_path / 'out'),
                   '--success', 'task_dnoe', '--quiet', timeout=600)
    assert proc.returncode == 0, proc.stderr
    ts = json.loads((tmp_path / 'out' / 'report.json').read_text())['task_success']
    assert ts['rate'] is None and 'never appeared' in ts['warning'] and 'task_dnoe' in proc.stderr


def test_hostile_names_are_plain_text_in_csv_and_html(tmp_path):
    pol = tmp_path / 'run_$1_$2'        # once crashed matplotlib's mathtext after report.json was written
    pol.mkdir()
    (pol / '=HYPERLINK(1).jsonl').write_text('{"reach_in_microwave": true, "fixture_fully_open_microwave": false, '
                                             '"task_done": true}\n')
    proc = audit([pol, pol], tmp_path / 'out')
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / 'out' / 'report.json').read_text())
    assert report['policies'][0]['policy'] == 'run_$1_$2' and report['policies'][0]['success_rate'] == 1.0
    rows = (tmp_path / 'out' / 'episodes.csv').read_text().splitlines()[1:]
    assert rows and all("'=HYPERLINK" in r for r in rows)
    assert (tmp_path / 'out' / 'report.html').stat().st_size > 0


def _predicate_bag(path: Path, stamps_ns: list[int], markers: dict[str, list[tuple[int, str]]] | None = None) -> None:
    """A bag of one ``/predicates`` array at each of ``stamps_ns`` (reach_in_microwave false), and per
    marker topic its ``std_msgs/String`` messages ``(stamp_ns, text)``."""
    ts = typestore()
    Arr, Pred = ts.types['safemanip_ros/msg/PredicateArray'], ts.types['safemanip_ros/msg/Predicate']
    Time, Header, String = (ts.types['builtin_interfaces/msg/Time'], ts.types['std_msgs/msg/Header'],
                            ts.types['std_msgs/msg/String'])
    w = SplitBagWriter(path, 'mcap', split_s=10.0**10)
    w.add_topic('/predicates', 'safemanip_ros/msg/PredicateArray')
    for topic, messages in (markers or {}).items():
        w.add_topic(topic, 'std_msgs/msg/String')
        for t_ns, text in messages:
            w.write(topic, t_ns, ts.serialize_cdr(String(data=text), 'std_msgs/msg/String'))
    for k, t_ns in enumerate(stamps_ns):
        stamp = Time(sec=t_ns // 10**9, nanosec=t_ns % 10**9)
        preds = [Pred(name='reach_in_microwave', value=False, unknown=False, source='t', data_stamp=stamp)]
        w.write('/predicates', t_ns, ts.serialize_cdr(Arr(header=Header(stamp=stamp, frame_id=''), seq=k,
                                                          predicates=preds), 'safemanip_ros/msg/PredicateArray'))
    w.close()


def test_time_gap_splits_the_rollout_instead_of_filling_it(tmp_path):
    """Two messages 10^9 s apart once built frames across the whole gap; a gap
    beyond 10 s ends the rollout, with a warning."""
    _predicate_bag(tmp_path / 'gap', [100 * 10**9 + i * 50_000_000 for i in range(10)] +
                   [10**18 + i * 50_000_000 for i in range(10)])
    proc = audit([tmp_path / 'gap'], tmp_path / 'out')
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / 'out' / 'report.json').read_text())
    assert report['rollouts'] == 2 and report['frames'] == 20
    assert [e['episode'] for e in report['episodes']] == ['gap', 'gap#gap1']
    assert 'rollout split' in proc.stderr


@pytest.mark.parametrize('marker', ['/rollout', '/episode'])
def test_a_rollout_topic_starts_a_rollout_named_by_its_text(tmp_path, marker):
    """Each ``/rollout`` message (``/episode``, its older name, alike) starts a rollout of its name."""
    t0_ns = 100 * 10**9
    _predicate_bag(tmp_path / 'marked', [t0_ns + k * 50_000_000 for k in range(20)],
                   {marker: [(t0_ns - 1, 'first'), (t0_ns + 10 * 50_000_000 - 1, 'second')]})
    proc = audit([tmp_path / 'marked'], tmp_path / 'out')
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / 'out' / 'report.json').read_text())
    assert [e['episode'] for e in report['episodes']] == ['first', 'second'], report['episodes']
    assert report['rollouts'] == 2 and report['frames'] >= 18


def test_unreadable_split_is_left_out_and_the_rest_read(bags, tmp_path):
    """A bag whose last of several splits is truncated is read up to that split,
    with a warning, instead of being skipped whole."""
    ts = typestore()
    Arr, Pred = ts.types['safemanip_ros/msg/PredicateArray'], ts.types['safemanip_ros/msg/Predicate']
    Time, Header = ts.types['builtin_interfaces/msg/Time'], ts.types['std_msgs/msg/Header']
    w = SplitBagWriter(tmp_path / 'three', 'mcap', split_s=1.0)
    w.add_topic('/predicates', 'safemanip_ros/msg/PredicateArray')
    for i in range(60):
        stamp = Time(sec=100 + i // 20, nanosec=(i % 20) * 50_000_000)
        preds = [Pred(name='reach_in_microwave', value=False, unknown=False, source='t', data_stamp=stamp)]
        w.write('/predicates', 100 * 10**9 + i * 50_000_000,
                ts.serialize_cdr(Arr(header=Header(stamp=stamp, frame_id=''), seq=i, predicates=preds),
                                 'safemanip_ros/msg/PredicateArray'))
    w.close()
    last = sorted((tmp_path / 'three').glob('*.mcap'), key=lambda p: (len(p.name), p.name))[-1]
    last.write_bytes(last.read_bytes()[:len(last.read_bytes()) // 2])
    proc = audit([tmp_path / 'three'], tmp_path / 'out')
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / 'out' / 'report.json').read_text())
    assert report['rollouts'] == 1 and report['frames'] == 40 and report['skipped'] == []
    assert 'left out unreadable split' in proc.stderr


_HEAP_PROBE = '''
import ctypes, sys
from pathlib import Path
class MallInfo(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int) for n in ('arena', 'ordblks', 'smblks', 'hblks', 'hblkhd', 'usmblks',
                                            'fsmblks', 'uordblks', 'fordblks', 'keepcost')]
libc = ctypes.CDLL(None)
libc.mallinfo.restype = MallInfo
from safemanip_ros.audit.engine import AuditConfig, run_audit
# glibc's start-up threshold, fixed (so not raised by whatever the imports freed): the control maps.
assert libc.mallopt(-3, 128 * 1024) == 1
if sys.argv[1] == 'audit':
    trace = Path(sys.argv[2]) / 'run.jsonl'
    trace.write_text('{"reach_in_microwave": true}\\n')
    cfg = AuditConfig((sys.argv[3],), sys.argv[4], only=(sys.argv[5],))
    run_audit([str(trace)], cfg, Path(sys.argv[2]) / 'out')
before = libc.mallinfo().hblks
buffer = bytearray(4 << 20)          # a bag's joined messages: a few MB
print(libc.mallinfo().hblks - before)
'''


@pytest.mark.slow
@pytest.mark.skipif(platform.libc_ver()[0] != 'glibc', reason='glibc malloc tuning; other C libraries keep their defaults')
def test_an_audit_process_keeps_its_freed_buffers_in_the_heap(tmp_path):
    """In a fresh process glibc maps every block over 128 KiB on its own and
    unmaps it when freed, so each bag's buffers fault in again (the first
    audit decoded predicate bags ~3x slower than the next).  After an audit
    has started, a 4 MB buffer comes from the heap: no new mapped block.
    The control, the same process without an audit, maps it."""
    def mapped_blocks(mode: str) -> int:
        proc = subprocess.run([sys.executable, '-c', _HEAP_PROBE, mode, str(tmp_path),
                               str(REPO / 'config' / 'properties' / 'safemanip.yaml'), SCENE, PROP],
                              capture_output=True, text=True, timeout=120, cwd=REPO)
        assert proc.returncode == 0, proc.stderr
        return int(proc.stdout.split()[-1])
    assert mapped_blocks('control') == 1
    assert mapped_blocks('audit') == 0


def test_report_json_is_the_report_with_one_line_per_list_element():
    from safemanip_ros.audit.report import report_json
    report = {'version': 2, 'config': {'properties': ['a.yaml'], 'only': []}, 'empty': [], 'none': None,
              'episodes': [{'source': 'b/ü', 'violations': [[1, 2.5]], 'timeline': None}, {'source': 'c'}],
              'rate': 0.1 + 0.2}
    text = report_json(report)
    assert json.loads(text) == report and text == report_json(json.loads(text))
    lines = text.splitlines()
    assert lines[0] == '{' and lines[-1] == '}' and len(lines) == 2 + len(report) + len(report['episodes']) + 1
    start = lines.index(' "episodes": [')
    assert [json.loads(line.rstrip(',')) for line in lines[start + 1:start + 3]] == report['episodes']


@pytest.mark.slow
def test_detached_results_give_the_same_report_and_hold_no_timelines(bags, tmp_path, monkeypatch):
    """``detach_timelines`` (what ``safemanip audit`` uses): results refer
    to their files for the per-frame fields, whichever worker computed them
    or when read back on resume, and report.json, the CSVs and report.html
    are the same text as from results that carry them."""
    import safemanip_ros.audit.engine as engine
    from safemanip_ros.audit import report as rp
    from safemanip_ros.audit.engine import AuditConfig, run_audit
    from safemanip_ros.audit.stored import TIMELINE_FIELDS, StoredField

    inputs = tmp_path / 'inputs'
    for k in range(6):
        shutil.copytree(bags / f'ep{k % 3}', inputs / f'copy{k}')
    cfg = AuditConfig((str(REPO / 'config' / 'properties' / 'safemanip.yaml'),), SCENE, only=(PROP,),
                      success='task_done')
    monkeypatch.setattr(engine, 'CHUNK', 2)        # forked workers return results too

    def outputs(out: Path, workers: int, detach: bool) -> tuple[list, dict[str, str]]:
        results, skipped = run_audit([str(inputs)], cfg, out, workers=workers, detach_timelines=detach)
        drawn = rp.predrawn_timelines(results)
        report = rp.build_report(results, skipped, {'properties': list(cfg.properties)})
        texts = {'report_json': rp.report_json(report)}
        rp.write_report_json(report, out / 'report.json')
        rp.write_csvs(report, out)
        for timelines in ('violations', 'all'):
            rp.write_html(report, out, timelines, drawn)
            texts[f'html_{timelines}'] = (out / 'report.html').read_text()
        texts.update({f.name: f.read_text() for f in sorted(out.glob('*.csv'))})
        texts['report.json'] = (out / 'report.json').read_text()
        assert not list(out.glob('.report.json.*'))       # the temporary file is gone
        return results, texts

    attached, want = outputs(tmp_path / 'attached', 1, False)
    assert want['report.json'] == want['report_json']
    assert any(ep['predicates'] and ep['verdicts'] for r in attached for ep in r['episodes'])
    for workers in (1, 2):
        out = tmp_path / f'detached{workers}'
        for run in ('computed', 'resumed'):
            results, got = outputs(out, workers, True)
            assert got == want, (workers, run)
            for r in results:
                for ep in r['episodes']:
                    assert all(isinstance(ep[f], StoredField) for f in TIMELINE_FIELDS if f in ep), (workers, run)
                    assert {'predicates', 'verdicts'} <= set(ep)


def test_a_result_file_rewritten_after_the_audit_is_an_error_not_other_data(bags, tmp_path):
    from safemanip_ros.audit.engine import AuditConfig, run_audit
    from safemanip_ros.audit.report import build_report, report_json
    from safemanip_ros.audit.stored import StoredResultError

    cfg = AuditConfig((str(REPO / 'config' / 'properties' / 'safemanip.yaml'),), SCENE, only=(PROP,))
    results, skipped = run_audit([str(bags / 'ep0')], cfg, tmp_path / 'out', detach_timelines=True)
    report = build_report(results, skipped, {})
    [stored] = list((tmp_path / 'out' / 'episodes').glob('*.json'))
    data = json.loads(stored.read_text())
    data['key'] = 'another'
    stored.write_text(json.dumps(data))
    with pytest.raises(StoredResultError, match=f'{stored}: changed after the audit wrote it'):
        report_json(report)
    stored.unlink()
    with pytest.raises(StoredResultError, match=f'{stored}: result file unreadable'):
        report_json(report)


@pytest.mark.parametrize('names', [('reach', 'open'), ('predicates', 'verdicts'), ('timeline_svg', 'a"predicates')])
def test_a_stored_field_reads_the_value_written_even_when_names_look_like_its_key(tmp_path, names):
    """A detached field decodes just its value where the file's text says
    unambiguously where it is, and the whole file where a predicate or
    instance is named like the field: the value is the one written either way."""
    from safemanip_ros.audit.engine import _store_result
    from safemanip_ros.audit.stored import TIMELINE_FIELDS, detached, resolved

    def rollout(k: int, drawn: bool) -> dict:
        ep = {'name': f'ep{k}', 'frames': 10 + k, 'instances': [{'name': names[0], 'unknown_predicates': {names[1]: k}}],
              'predicates': {names[0]: {'true': [[k, k + 1]], 'unknown': []}, names[1]: {'true': [], 'unknown': [[0, k]]}},
              'verdicts': {f'{names[1]}[x=1]': [[0, k, 1]]}}
        if drawn:
            ep['timeline_svg'] = f'<svg "{names[0]}":"{k}"></svg>'
        return ep

    result = {'source': '/bags/b', 'episodes': [rollout(k, drawn) for k, drawn in enumerate([True, False, True, True])]}
    file = _store_result(tmp_path, 'b', 'k1', result)
    light = detached(result, file, 'k1')
    for want, got in zip(result['episodes'], light['episodes']):
        assert set(want) == set(got)
        for name in TIMELINE_FIELDS:
            if name in want:
                assert resolved(got[name]) == want[name], name


@pytest.mark.parametrize('enabled', [True, False])
def test_gc_paused_restores_the_collector_as_it_was(enabled):
    import gc

    from safemanip_ros.gc_pause import gc_paused
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        with pytest.raises(KeyError):
            with gc_paused():
                assert not gc.isenabled()
                with gc_paused():                   # nested: the inner exit leaves it off
                    pass
                assert not gc.isenabled()
                raise KeyError('inside')
        assert gc.isenabled() == enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_collector_time_counts_each_pass_once_and_its_time():
    import gc

    from safemanip_ros.gc_pause import collector_time
    timer = collector_time()
    assert collector_time() is timer and gc.callbacks.count(timer._on_pass) == 1     # watched once
    junk = []
    for _ in range(20000):          # cycles, so the pass has something to traverse and free
        a: list = []
        a.append(a)
        junk.append(a)
    del junk, a
    passes, total_s = timer.passes, timer.total_s
    gc.collect()
    assert timer.passes == passes + 1 and timer.total_s > total_s


def test_a_report_read_without_rollouts_is_the_report_less_its_rollouts(tmp_path):
    """The gate's read skips the rollout entries by line, in report.json as
    the audit writes it and as json.dumps(indent=1) would, wherever the key
    stands; a file laid out otherwise is decoded whole; broken JSON names the file."""
    from safemanip_ros.audit.report import read_report, report_json
    from safemanip_ros.audit.schema import REPORT_VERSION
    from safemanip_ros.errors import SafemanipError

    eps = [{'source': 's]', 'episode': f'e{k}', 'notes': ' ]', 'timeline': [[k, {'x': ' ],'}]]} for k in range(3)]
    head = {'version': REPORT_VERSION, 'rollouts': 3, 'properties': {'p': {'clusters': {'violations': [1]}}},
            'categories': {}, 'skipped': [{'reason': 'x\n ]'}]}
    layouts = {'middle': {**head, 'episodes': eps, 'horizons': [{'h': 1}]}, 'last': {**head, 'episodes': eps},
               'empty': {**head, 'episodes': [], 'policies': []}}
    for name, report in layouts.items():
        texts = {'audit': report_json(report), 'indent': json.dumps(report, indent=1), 'compact': json.dumps(report)}
        for how, text in texts.items():
            path = tmp_path / f'{name}-{how}.json'
            path.write_text(text)
            whole = read_report(path)
            assert whole == report
            light = read_report(path, episodes=False)
            assert light == {k: v for k, v in report.items() if k != 'episodes' or how == 'compact' or not v}, (name, how)
    bad = tmp_path / 'bad.json'
    bad.write_text(report_json(layouts['middle'])[:-3])
    with pytest.raises(SafemanipError, match=f'{bad}: cannot read report'):
        read_report(bad, episodes=False)
    # A key given twice (a hand edit, a bad merge) is an error, not its last value, in every layout.
    for how, text in {'audit': report_json(layouts['middle']), 'compact': json.dumps(layouts['middle'])}.items():
        repeated = tmp_path / f'repeated-{how}.json'
        repeated.write_text(text.replace('"rollouts": 3', '"rollouts": 30, "rollouts": 3', 1))
        for rollouts in (False, True):
            with pytest.raises(SafemanipError, match=f"{repeated}: cannot read report: 'rollouts' is given twice"):
                read_report(repeated, episodes=rollouts)


def test_gate_baseline_interval_is_its_definition_to_the_bit():
    """The baseline comparison's interval: resamples drawn as int32 and summed
    by blocks give what gathering int64 draws at once gave, for counts and
    for other values, clusters of different numbers."""
    from safemanip_ros.audit.gate import _diff_ci

    def definition(cand, base, confidence, seed):
        cv, cn = (np.array(cand['clusters'][k], float) for k in ('violations', 'triggers'))
        bv, bn = (np.array(base['clusters'][k], float) for k in ('violations', 'triggers'))
        rng = np.random.default_rng(seed)
        ci, bi = rng.integers(0, cv.size, (2000, cv.size)), rng.integers(0, bv.size, (2000, bv.size))
        d = (cv[ci].sum(1) / np.maximum(cn[ci].sum(1), 1e-12) - bv[bi].sum(1) / np.maximum(bn[bi].sum(1), 1e-12))
        d = d[(cn[ci].sum(1) > 0) & (bn[bi].sum(1) > 0)]
        return float(np.quantile(d, (1 - confidence) / 2)), float(np.quantile(d, 1 - (1 - confidence) / 2))

    rng = np.random.default_rng(11)
    for trial in range(12):
        def clusters(n: int) -> dict:
            t = rng.integers(0, 5, n).astype(float) if trial % 2 else rng.random(n) * 4
            return {'clusters': {'violations': (t * rng.random(n)).round(trial % 2 * 9).tolist(), 'triggers': t.tolist()}}
        cand, base = clusters(int(rng.integers(1, 700))), clusters(int(rng.integers(1, 700)))
        assert _diff_ci(cand, base, 0.95, seed=trial) == definition(cand, base, 0.95, trial), trial


def test_a_write_that_fails_midway_leaves_the_old_file_and_no_temporary(tmp_path):
    from safemanip_ros.atomic_file import write_text_atomically

    path = tmp_path / 'sub' / 'report.json'
    write_text_atomically(path, ['{"old":', ' 1}'])
    assert path.read_text() == '{"old": 1}'

    def torn():
        yield '{"new": '
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_text_atomically(path, torn())
    assert path.read_text() == '{"old": 1}' and sorted(p.name for p in path.parent.iterdir()) == ['report.json']


@pytest.mark.parametrize('scene', [['--scene', SCENE], ['--config', str(REPO / 'config' / 'robots' / 'panda_demo.yaml')]])
def test_only_audits_a_recording_of_the_whole_suite(tmp_path, scene):
    """``--only`` audits fewer properties of the same suite: a trace giving the names the others read is
    audited, not skipped as unknown (with a robot configuration too, which leaves out what it cannot ground);
    a name the suite does not know still skips it."""
    traces = tmp_path / 'traces'
    traces.mkdir()
    whole = {'forbidden_contact': False, 'reach_in_microwave': False, 'fixture_fully_open_microwave': True}
    (traces / 'whole.jsonl').write_text(''.join(json.dumps(whole) + '\n' for _ in range(5)))
    (traces / 'typo.jsonl').write_text(json.dumps({**whole, 'forbiden_contact': True}) + '\n')
    proc = run_cli('audit', str(traces), *scene, '--only', 'no_forbidden_contact',
                   '--out', str(tmp_path / 'out'), '--quiet')
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / 'out' / 'report.json').read_text())
    assert [Path(e['source']).name for e in report['episodes']] == ['whole.jsonl'], report['skipped']
    [skipped] = report['skipped']
    assert 'typo.jsonl' in str(skipped) and "unknown predicate 'forbiden_contact'" in str(skipped)


def test_objects_from_images_without_a_configuration_is_one_line(tmp_path):
    """``--objects-from-images`` finds the configuration's camera.objects: without ``--config`` there is
    nothing to find (one line, exit 2)."""
    proc = run_cli('audit', str(tmp_path), '--out', str(tmp_path / 'o'), '--objects-from-images', '--quiet')
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        'safemanip: error: --objects-from-images needs --config ROBOT.yaml: its camera.objects say what to find'], \
        proc.stderr
