"""The benchmark scripts run (small sizes) and print their figures.  Nothing
here depends on how fast they are."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import REPO


@pytest.mark.parametrize('script, expect', [
    ('bench_ltlf.py', ['## Compile: reach-avoid', 'G(a -> F[0,k] (b & F[0,k] c))', 'symbolic s', 'mona s', '## Stepping',
                       'M steps/s']),
    ('bench_monitor.py', ['## Live tick', '## Offline', 'M property-frames/s']),
    ('bench_audit.py', ['## Audit throughput', "rosbags' bare rate", 'report for', 'json.dumps(indent=1)',
                        'results held for the report', 'detached, as safemanip audit', 'gate with a baseline',
                        '## Fixed costs', 'import of the audit engine', 'in a fresh process', '.jsonl traces',
                        '## Raw-input audit', 'grounded offline', '## Scaling at fleet scale',
                        "this audit's own ceiling", 'the whole audit on 2 workers', 'as safemanip audit runs it']),
    ('bench_grounding.py', ['## Grounding cost per message', 'one core at 20 Hz']),
    ('bench_live.py', ['touches:', 'hold delay beyond the 1 s tolerance', 'false fail-safe holds', 'RSS']),
    ('bench_soak.py', ['== bench_soak: 0.15 min at 100 Hz', 'RSS slope over the second half', 'CPU share slope',
                       'overruns', 'wake-ups of the stall probe', 'logged moments', 'bag:', 'stack exit code 0']),
    ('bench_monitor_frame.py', ['== bench_monitor_frame: 200 instances', 'running metrics, published: as bytes',
                                'violation events, published to a subscriber in another process: as bytes',
                                'read directly', 'grounding sources']),
    ('bench_compat.py', ['compat / default: offline throughput', 'live median us']),
    ('bench_specrl.py', ['+ SpecMonitor, 1 spec', '+ SpecMonitorVector', 'evaluator:', 'trajectories/s']),
    ('bench_sim_server.py', ['== bench_sim_server: Lift rollouts, 1 afresh and 2 served', 'afresh per rollout (before)',
                             'sim_bridge --serve: first rollout', 'less than afresh']),
    ('bench_startup.py', ['== bench_startup: fresh interpreters', 'command line:', 'live stack:',
                          'with the bytecode cache', 'without it (before)']),
    ('bench_foxglove.py', ['## Foxglove server: CPU per monitor frame', 'share of a 20 Hz core', '0 errors)']),
    ('bench_gate.py', ['false PASS at the limit', 'fixed rule re-checked', 'zero violations pass after',
                       'true 1 %: PASS median', 'true 20 %: FAIL median', '8 limits at family-wise',
                       'identical: True']),
])
def test_bench_runs(script, expect):
    proc = subprocess.run([sys.executable, str(REPO / 'bench' / script), '--quick'], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    for text in expect:
        assert text in proc.stdout
