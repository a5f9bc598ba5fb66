"""``safemanip demo --canary``: two canaries gated live over DDS from the
monitors' final metrics of real physics episodes, and each live decision
equal to ``gate --sequential`` on the audit of the same run's recorded bags."""

from __future__ import annotations

import json

from conftest import run_cli


def test_canary_demo_passes_the_good_fails_the_dropper_and_agrees_with_its_bags(tmp_path):
    out = tmp_path / 'canary'
    proc = run_cli('demo', '--canary', '--out', str(out), timeout=1200)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
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
