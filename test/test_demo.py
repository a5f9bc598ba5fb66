"""The README's main-job command runs end to end and passes its own checks:
physics-simulated rollouts watched live over DDS, the supervisor holding the
simulated arm, bags recorded and audited; and the fast scripted demo."""

from __future__ import annotations

import json
import re
import subprocess

from conftest import (
    REPO,  # noqa: E402
    run_cli,
)


def test_make_demo(tmp_path):
    out = tmp_path / 'demo'
    proc = subprocess.run(['make', '-s', 'demo', f'DEMO_ARGS=--out {out}'], cwd=REPO, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    text = proc.stdout
    assert any(line.startswith('safemanip demo: 8 robosuite rollouts') for line in text.splitlines()[:3]), \
        text[:500]
    assert 'MISMATCH' not in text, text
    for task, rollouts in (('Lift', 6), ('PickPlace', 2)):
        assert f'report ({task}): {out / "audit" / task / "report.html"}' in text
        report = json.loads((out / 'audit' / task / 'report.json').read_text())
        assert report['rollouts'] == rollouts and not report['skipped']
    rows = {line.split()[0]: line for line in text.splitlines() if line.startswith(('lift_', 'pickplace_'))}
    # Detected live at the drop. It is 0 frames late in the offline benchmark, and usually live; on a busy
    # machine the live loop has read it one frame later (its frames follow /clock as it arrives), so the
    # check allows a frame either side and one more late, not exactly 0.
    latency = re.search(r'release_only_over_support \(([+-]\d+)\)', rows['lift_midair_drop_002'])
    assert latency and -1 <= int(latency.group(1)) <= 2, rows['lift_midair_drop_002']
    assert 'no_dragging_on_support' in rows['lift_drag_003']
    assert 'no_forbidden_contact' in rows['lift_table_smash_004']
    assert 'raw_contact_blocks_clean_until_sanitized' in rows['pickplace_touch_raw_then_clean_007']
    for clean in ('lift_none_001', 'pickplace_none_006', 'lift_none_008'):
        assert 'clean' in rows[clean] and ' none ' in rows[clean], rows[clean]
    # The supervisor's pause reached the simulated arm, and the bridge obeyed it.
    truth = json.loads((out / 'bags' / 'lift_table_smash_004' / 'truth.json').read_text())
    assert truth['supervisor_holds'], truth
    # A newcomer drafts a configuration from the demo's own recording (its bags hold the raw inputs too).
    drafted = tmp_path / 'drafted.yaml'
    init = run_cli('config', 'init', '--from-bag', str(out / 'bags' / 'lift_none_001'), '--out', str(drafted))
    assert init.returncode == 0 and 'CHOOSE' in drafted.read_text(), init.stderr
    assert 'robot0_joint1' in drafted.read_text() and 'cube' in drafted.read_text()


def test_the_demo_runs_from_pixels(tmp_path):
    """``safemanip demo --perception camera``: the cube found in the bridge's
    rendered RGB-D frames (no simulator truth for it on /tf), the stack on the
    bridge's /clock however slow rendering makes it: the drop and the drag
    held, the clean rollout never."""
    out = tmp_path / 'demo'
    proc = run_cli('demo', '--perception', 'camera', '--rollouts', '3', '--out', str(out), timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = {line.split()[0]: line for line in proc.stdout.splitlines() if line.startswith('lift_')}
    assert set(rows) == {'lift_none_001', 'lift_midair_drop_002', 'lift_drag_003'}, proc.stdout
    assert 'release_only_over_support' in rows['lift_midair_drop_002'] and 'yes' in rows['lift_midair_drop_002']
    assert 'no_dragging_on_support' in rows['lift_drag_003'] and 'yes' in rows['lift_drag_003']
    assert ' none ' in rows['lift_none_001'], rows['lift_none_001']
    # The cube's poses in the recording are the camera's: 10 Hz detections without orientation, no truth.
    from safemanip_ros.bag import open_bag
    from safemanip_ros.bag.typestore import typestore
    ts = typestore()
    with open_bag(out / 'bags' / 'lift_midair_drop_002') as bag:
        conns = [c for c in bag.connections if c.topic == '/tf']
        cube = [t for _, _, raw in bag.messages(conns) for t in ts.deserialize_cdr(raw, conns[0].msgtype).transforms
                if t.child_frame_id == 'cube_main']
    assert cube and all((t.transform.rotation.x, t.transform.rotation.w) == (0.0, 1.0) for t in cube)


def test_scripted_demo_over_dds():
    proc = run_cli('demo', '--scripted')
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert 'published over Fast DDS between two rclpy nodes' in out
    assert 'all injected violations caught at their frame, no false alarms' in out
    assert out.count(' ok\n') == 15 and 'FALSE ALARM' not in out and 'MISSED' not in out


def test_scripted_demo_offline_gives_the_same_table():
    proc = run_cli('demo', '--scripted', '--offline')
    assert proc.returncode == 0, proc.stderr
    assert '(offline)' in proc.stdout and proc.stdout.count(' ok\n') == 15
