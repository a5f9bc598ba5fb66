"""``safemanip demo --canary``: two canaries gated live over DDS from the
monitors' final metrics of real physics rollouts, and each live decision
equal to ``gate --sequential`` on the audit of the same run's recorded bags."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def test_canary_demo_passes_the_good_fails_the_dropper_and_agrees_with_its_bags(tmp_path):
    out = tmp_path / 'canary'
    # The canaries take ROS_DOMAIN_ID and the one after it: two domains no test worker uses (conftest: the
    # workers' are the base + 1 .. + n).
    first = int(os.environ['SAFEMANIP_TEST_DOMAIN_BASE']) + 100
    proc = subprocess.run([str(Path(sys.executable).parent / 'safemanip'), 'demo', '--canary', '--out', str(out)],
                          capture_output=True, text=True, timeout=1200,
                          env=dict(os.environ, ROS_DOMAIN_ID=str(first)))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    assert f'(fault: none, ROS_DOMAIN_ID {first})' in proc.stdout and f'ROS_DOMAIN_ID {first + 1})' in proc.stdout, \
        proc.stdout[:600]
    rows = {line.split()[0]: line.split() for line in proc.stdout.splitlines() if line.startswith(('good ', 'dropper '))}
    # canary, fault, rollouts, violated, live gate, decided after N rollouts, offline decision after N
    good, dropper = rows['good'], rows['dropper']
    assert good[4] == 'PASS' and dropper[4] == 'FAIL', proc.stdout
    assert good[7:10] == ['PASS', 'after', good[5]] and dropper[7:10] == ['FAIL', 'after', dropper[5]], proc.stdout
    assert 'MISMATCH' not in proc.stdout
    # As early as the evidence allows: 8 clean rollouts pass a 40 % limit at alpha 0.05, 5 violating ones fail it.
    assert int(good[5]) <= 10 and int(dropper[5]) <= 7, proc.stdout
    for name, decision in (('good', 'PASS'), ('dropper', 'FAIL')):
        state = json.loads((out / name / 'gate_state.json').read_text())
        assert len(state['seen']) == int(rows[name][2])          # every rollout counted once, none twice
        alerts = [json.loads(line) for line in (out / name / 'alerts.jsonl').read_text().splitlines()]
        assert [a['decision'] for a in alerts if a.get('type') == 'gate'] == [decision], alerts
        report = json.loads((out / name / 'audit' / 'report.json').read_text())
        assert report['rollouts'] == int(rows[name][2]) and report['sequential']['limits'][0]['decision'] == decision
