"""The access-control policy enforced by real DDS Security implementations.

The ROS 2 wheels' Fast DDS is built without the security plugins, so these
tests take two DDS implementations built with them, from Debian: eProsima
Fast DDS 2.9 (``libfastrtps-dev``; the DDS of ROS 2's default rmw) and
Eclipse Cyclone DDS (``cyclonedds-dev``, ``cyclonedds-tools``);
tools/setup_env.sh installs them as root; without them these tests fail,
loudly.  The keystore, the governance and each enclave's signed permissions
are made as ``ros2 security`` makes them from ``config/security/policy.xml``
(test/dds_security.py), and each participant is a small program
(test/helpers/dds_security/: ``dds_probe.c`` on Cyclone DDS,
``fastdds_probe.cpp`` on Fast DDS, secured with the participant properties
rmw_fastrtps sets) that publishes or subscribes one DDS topic, with the
names rmw gives ROS topics (``rt/…``) and services (``rq/…Request``).  What
is proved here is the policy's meaning under enforcement by both: who may
publish a hold or call the operator's services, and that an outsider or a
forged keystore is not heard.  rclpy over a secured Fast DDS is not
exercised (no security plugins on PyPI).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import dds_security as ds
import pytest
from conftest import REPO

POLICY = REPO / 'config' / 'security' / 'policy.xml'
PROBE_SRC = Path(__file__).parent / 'helpers' / 'dds_security'
HOLD = 'rt/joint_trajectory_controller/joint_trajectory'
ACK = 'rq/supervisor/acknowledgeRequest'
SETUP = ('install the Debian packages cyclonedds-dev cyclonedds-tools libfastrtps-dev openssl '
         '(tools/setup_env.sh does it as root)')
SECURED_FLOW_S = 60.0       # bound on discovery + authentication + a flow of samples on a busy machine
WANT_SAMPLES = 50           # samples (1 s of flow) of each allowed writer: the reader was listening
# An enclave's participant joins; the topic itself is refused (Cyclone DDS at the topic, Fast DDS at the writer).
REFUSED_TOPIC = {'topic refused', 'writer refused'}
FASTDDS_HEADER = Path('/usr/include/fastdds/dds/domain/DomainParticipant.hpp')


def _domain() -> int:
    # Away from the ROS domains the other tests use (conftest: 1 … ~100).
    return int(os.environ.get('ROS_DOMAIN_ID', '0')) % 100 + 120


Who = ds.Enclave | str    # an enclave, or 'outsider': a participant with no security at all


@dataclass(frozen=True)
class Dds:
    """One DDS implementation's probe: its binary and how a participant of ``who`` is configured."""
    name: str
    binary: Path
    env_of: Callable[[Who], dict[str, str]]

    def env(self, who: Who) -> dict[str, str]:
        return {**os.environ, **self.env_of(who)}


def _build(tool_check: list[str], build: list[list[str]], out: Path, sources: tuple[str, ...]) -> None:
    for tool in tool_check:
        assert shutil.which(tool), f'{tool} not found: {SETUP}'
    for name in sources:
        shutil.copy(PROBE_SRC / name, out / name)
    for cmd in build:
        proc = subprocess.run(cmd, cwd=out, capture_output=True, text=True, timeout=180)
        assert proc.returncode == 0, f'{" ".join(cmd)} failed: {proc.stderr[-2000:]}'


def _cyclone(out: Path) -> Dds:
    assert Path('/usr/include/dds/dds.h').exists(), f'Cyclone DDS headers missing: {SETUP}'
    _build(['idlc', 'cc', 'openssl'], [['idlc', 'probe.idl'],
                                       ['cc', '-O1', '-o', 'dds_probe', 'dds_probe.c', 'probe.c', '-lddsc']],
           out, ('dds_probe.c', 'probe.idl'))
    return Dds('cyclone', out / 'dds_probe', lambda who: {
        'CYCLONEDDS_URI': ds.plain_uri(_domain()) if isinstance(who, str) else who.cyclone_uri()})


def _fastdds(out: Path) -> Dds:
    assert FASTDDS_HEADER.exists(), f'Fast DDS headers missing: {SETUP}'
    _build(['c++', 'openssl'], [['c++', '-O1', '-std=c++17', '-o', 'fastdds_probe', 'fastdds_probe.cpp',
                                 '-lfastrtps', '-lfastcdr']], out, ('fastdds_probe.cpp',))
    return Dds('fastdds', out / 'fastdds_probe', lambda who: {
        'SAFEMANIP_PROBE_ENCLAVE': '' if isinstance(who, str) else str(who.folder)})


@pytest.fixture(scope='module', params=['cyclone', 'fastdds'])
def probe(request, tmp_path_factory) -> Dds:
    out = tmp_path_factory.mktemp(f'{request.param}_probe')
    return _cyclone(out) if request.param == 'cyclone' else _fastdds(out)


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
        """Every line, once the probe has ended by itself (a subscriber's counts come at its end)."""
        out, _ = self.proc.communicate(timeout=timeout_s)
        return out.splitlines()

    def outcome(self, timeout_s: float) -> str:
        """The probe's first answer, 'ready' or what was refused; the probe is then stopped.  The bound is on
        that line, not on the process's end: the participant's teardown, with handshakes to every peer
        perhaps still in progress, is not what is tested."""
        lines: list[str] = []

        def read() -> None:
            for line in self.proc.stdout or ():
                lines.append(line.rstrip('\n'))
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        deadline = time.monotonic() + timeout_s
        try:
            while not any(_answer(line) for line in list(lines)):
                assert reader.is_alive() or any(_answer(line) for line in list(lines)), \
                    f'the probe ended (exit {self.proc.wait()}) saying neither ready nor refused: {lines}'
                assert time.monotonic() < deadline, f'no answer from the probe within {timeout_s} s: {lines}'
                time.sleep(0.02)
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return _outcome(list(lines))


def _start(probe: Dds, who: Who, role: str, topic: str, seconds: float, *ids: int) -> Probe:
    """A publisher writing as writer ``ids[0]``, or a subscriber that stops once each writer of ``ids`` gave
    ``WANT_SAMPLES``."""
    args = [str(probe.binary), str(_domain()), role, topic, f'{seconds:g}']
    args += [str(ids[0] if ids else 0)] if role == 'pub' else [str(WANT_SAMPLES), *map(str, ids)]
    # The implementation's own log (Fast DDS logs a refusal at length) stays out of the answer lines.
    return Probe(subprocess.Popen(args, env=probe.env(who), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True))


def _answer(line: str) -> str | None:
    """'ready' or what was refused ('participant refused', 'topic …', 'writer …', 'reader …'), from one line
    of a probe's output; None for any other line."""
    words = line.split()
    if words[1:2] == ['refused'] and words[0] in ('participant', 'topic', 'writer', 'reader'):
        return ' '.join(words[:2])
    return 'ready' if line.strip() == 'ready' else None


def _outcome(lines: list[str]) -> str:
    """The first answer (:func:`_answer`) in a probe's output."""
    for line in lines:
        if (answer := _answer(line)) is not None:
            return answer
    raise AssertionError(f'the probe said neither ready nor refused: {lines}')


def _received(lines: list[str]) -> dict[int, int]:
    """writer id → samples received, from a subscriber probe's ``received ID N`` lines."""
    counts = {}
    for line in lines:
        if line.startswith('received '):
            _, wid, n = line.split()
            counts[int(wid)] = int(n)
    return counts


def _flow(probe: Dds, reader: ds.Enclave, topic: str, controls: list[Who], rogues: list[Who]) -> dict[int, int]:
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
        assert p.outcome(SECURED_FLOW_S) == 'ready', path


def test_only_the_supervisor_may_publish_a_hold(probe, enclaves):
    allowed = {path for path in _policy_enclaves() if HOLD in ds.enclave_topics(POLICY, path)[0]}
    assert allowed == {'/safemanip/stack', '/safemanip/supervisor'}
    probes = {path: _start(probe, enclaves[path], 'pub', HOLD, 0) for path in _policy_enclaves()}
    outcomes = {path: p.outcome(SECURED_FLOW_S) for path, p in probes.items()}
    assert {path for path, o in outcomes.items() if o == 'ready'} == allowed, outcomes
    assert {o for path, o in outcomes.items() if path not in allowed} <= REFUSED_TOPIC, outcomes


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
        assert p.outcome(SECURED_FLOW_S) in REFUSED_TOPIC, path
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
