"""The access-control policy enforced by a real DDS Security implementation.

The ROS 2 wheels' Fast DDS is built without the security plugins, so these
tests take Eclipse Cyclone DDS with its DDS Security plugins (the Debian
packages ``cyclonedds-dev``, ``cyclonedds-tools``; tools/setup_env.sh installs
them as root; without them these tests fail, loudly).  The keystore, the
governance and each enclave's signed permissions are made as ``ros2 security``
makes them from ``config/security/policy.xml`` (test/dds_security.py), and
each participant is a small C program (test/helpers/dds_security/dds_probe.c)
that publishes or subscribes one DDS topic, with the names rmw gives ROS
topics (``rt/…``) and services (``rq/…Request``).  What is proved here is
the policy's meaning under enforcement: who may publish a hold or call the
operator's services, and that an outsider or a forged keystore is not heard.
rclpy over a secured Fast DDS is not exercised (no security plugins on PyPI).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import dds_security as ds
import pytest
from conftest import REPO

POLICY = REPO / 'config' / 'security' / 'policy.xml'
PROBE_SRC = Path(__file__).parent / 'helpers' / 'dds_security'
HOLD = 'rt/joint_trajectory_controller/joint_trajectory'
ACK = 'rq/supervisor/acknowledgeRequest'
SETUP = 'install the Debian packages cyclonedds-dev cyclonedds-tools (tools/setup_env.sh does it as root)'
SECURED_FLOW_S = 60.0       # bound on discovery + authentication + a flow of samples on a busy machine
WANT_SAMPLES = 50           # samples (1 s of flow) of each allowed writer: the reader was listening


def _domain() -> int:
    # Away from the ROS domains the other tests use (conftest: 1 … ~100).
    return int(os.environ.get('ROS_DOMAIN_ID', '0')) % 100 + 120


@pytest.fixture(scope='module')
def probe(tmp_path_factory) -> Path:
    for tool in ('idlc', 'cc', 'openssl'):
        assert shutil.which(tool), f'{tool} not found: {SETUP}'
    assert Path('/usr/include/dds/dds.h').exists(), f'Cyclone DDS headers missing: {SETUP}'
    out = tmp_path_factory.mktemp('dds_probe')
    for name in ('dds_probe.c', 'probe.idl'):
        shutil.copy(PROBE_SRC / name, out / name)
    subprocess.run(['idlc', 'probe.idl'], cwd=out, check=True, capture_output=True, timeout=60)
    subprocess.run(['cc', '-O1', '-o', 'dds_probe', 'dds_probe.c', 'probe.c', '-lddsc'], cwd=out, check=True,
                   capture_output=True, timeout=120)
    return out / 'dds_probe'


@pytest.fixture(scope='module')
def keystore(tmp_path_factory) -> ds.Keystore:
    return ds.Keystore(tmp_path_factory.mktemp('keystore'), _domain())


def _policy_enclaves() -> list[str]:
    import xml.etree.ElementTree as ET
    return [e.get('path') or '' for e in ET.parse(POLICY).getroot().iter('enclave')]


@pytest.fixture(scope='module')
def enclaves(keystore) -> dict[str, ds.Enclave]:
    made = {path: keystore.enclave(path, *ds.enclave_topics(POLICY, path)) for path in _policy_enclaves()}
    # The robot's controller: the user's own enclave (docs/security.md), here only its subscription.
    made['/robot/controller'] = keystore.enclave('/robot/controller', set(), {HOLD})
    return made


@dataclass
class Probe:
    proc: subprocess.Popen[str]

    def result(self, timeout_s: float) -> list[str]:
        out, _ = self.proc.communicate(timeout=timeout_s)
        return out.splitlines()


Who = ds.Enclave | str    # an enclave, or 'outsider': a participant with no security at all


def _start(probe: Path, who: Who, role: str, topic: str, seconds: float, *ids: int) -> Probe:
    """A publisher writing as writer ``ids[0]``, or a subscriber that stops once each writer of ``ids`` gave
    ``WANT_SAMPLES``."""
    uri = ds.plain_uri(_domain()) if isinstance(who, str) else who.cyclone_uri()
    args = [str(probe), str(_domain()), role, topic, f'{seconds:g}']
    args += [str(ids[0] if ids else 0)] if role == 'pub' else [str(WANT_SAMPLES), *map(str, ids)]
    return Probe(subprocess.Popen(args, env={**os.environ, 'CYCLONEDDS_URI': uri}, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True))


def _outcome(lines: list[str]) -> str:
    """'ready' or 'refused' (participant, topic or endpoint), from a probe's output."""
    for line in lines:
        if ' refused ' in line:
            return 'refused'
        if line == 'ready':
            return 'ready'
    raise AssertionError(f'the probe said neither ready nor refused: {lines}')


def _received(lines: list[str]) -> dict[int, int]:
    """writer id → samples received, from a subscriber probe's ``received ID N`` lines."""
    counts = {}
    for line in lines:
        if line.startswith('received '):
            _, wid, n = line.split()
            counts[int(wid)] = int(n)
    return counts


def _flow(probe: Path, reader: ds.Enclave, topic: str, controls: list[Who], rogues: list[Who]) -> dict[int, int]:
    """One reader on ``topic``; writers started at once: ``controls`` (ids 1…, allowed) and ``rogues`` (ids
    after them).  The reader stops once every control gave ``WANT_SAMPLES``: each rogue, started with them, had
    as long as the slowest allowed participant to authenticate, match and be heard."""
    writers = [*controls, *rogues]
    sub = _start(probe, reader, 'sub', topic, SECURED_FLOW_S, *range(1, len(controls) + 1))
    pubs = [_start(probe, who, 'pub', topic, SECURED_FLOW_S, wid) for wid, who in enumerate(writers, 1)]
    try:
        lines = sub.result(SECURED_FLOW_S + 30)
    finally:
        for p in pubs:
            p.proc.terminate()
        for p in pubs:
            p.proc.wait(timeout=30)
    assert _outcome(lines) == 'ready', lines
    counts = _received(lines)
    assert all(counts.get(wid, 0) >= WANT_SAMPLES for wid in range(1, len(controls) + 1)), \
        f'an allowed writer was not heard within {SECURED_FLOW_S} s: {counts}'
    return {wid: counts.get(wid, 0) for wid in range(len(controls) + 1, len(writers) + 1)}


def test_every_enclave_of_the_policy_is_accepted_by_dds_security(probe, enclaves):
    """Each enclave's permissions load and verify, and grant its first topic (a typo in the policy would not)."""
    probes = {}
    for path in _policy_enclaves():
        pub, _ = ds.enclave_topics(POLICY, path)
        probes[path] = _start(probe, enclaves[path], 'pub', sorted(pub)[0], 0)
    for path, p in probes.items():
        lines = p.result(60)
        assert _outcome(lines) == 'ready', (path, lines)


def test_only_the_supervisor_may_publish_a_hold(probe, enclaves):
    allowed = {path for path in _policy_enclaves() if HOLD in ds.enclave_topics(POLICY, path)[0]}
    assert allowed == {'/safemanip/stack', '/safemanip/supervisor'}
    probes = {path: _start(probe, enclaves[path], 'pub', HOLD, 0) for path in _policy_enclaves()}
    outcomes = {path: _outcome(p.result(60)) for path, p in probes.items()}
    assert {path for path, o in outcomes.items() if o == 'ready'} == allowed, outcomes


def test_the_robot_hears_the_supervisors_hold_and_no_outsider_or_forged_one(probe, enclaves, tmp_path):
    # A forged keystore: its own CA, granting its "supervisor" the hold topic.
    forged = ds.Keystore(tmp_path / 'forged', _domain(), ca_name='not the site CA')
    impostor = forged.enclave('/safemanip/supervisor', {HOLD}, set())
    rogues = _flow(probe, enclaves['/robot/controller'], HOLD,
                   [enclaves['/safemanip/supervisor'], enclaves['/safemanip/stack']], ['outsider', impostor])
    assert rogues == {3: 0, 4: 0}, f'writer 3 is an outsider, 4 a forged supervisor: {rogues}'


def test_only_the_operator_may_acknowledge(probe, enclaves):
    callers = {path for path in _policy_enclaves() if ACK in ds.enclave_topics(POLICY, path)[0]}
    assert callers == {'/safemanip/operator'}
    refused = {path: _start(probe, enclaves[path], 'pub', ACK, 0) for path in _policy_enclaves()
               if path not in callers}
    for path, p in refused.items():
        assert _outcome(p.result(60)) == 'refused', path
    rogues = _flow(probe, enclaves['/safemanip/supervisor'], ACK, [enclaves['/safemanip/operator']], ['outsider'])
    assert rogues == {2: 0}, rogues


def test_an_unsecured_participant_hears_nothing(probe, enclaves):
    """The governance refuses unauthenticated participants: an outsider's reader hears no secured hold
    in the time the robot's reader takes to hear the supervisor's."""
    eavesdropper = _start(probe, 'outsider', 'sub', HOLD, SECURED_FLOW_S, 1)
    try:
        _flow(probe, enclaves['/robot/controller'], HOLD, [enclaves['/safemanip/supervisor']], [])
    finally:
        eavesdropper.proc.terminate()
    lines = eavesdropper.result(30)
    assert _outcome(lines) == 'ready' and _received(lines) == {}, lines
