"""DDS Security files made the way ``ros2 security`` (sros2) makes them, for
test_security_enforcement.py, where ``sros2`` is not installed:

* a keystore CA (prime256v1, as DDS Security 9.3.1 asks) that signs every
  identity, the governance and every permissions document;
* sros2's default governance: no unauthenticated participant, join, read and
  write access control on every topic, discovery and data encrypted;
* each enclave's permissions, translated from a SROS2 policy file by sros2's
  rules (``sros2/policy/templates/dds/permissions.xsl``): a topic ``name`` of
  a profile in namespace ``ns`` becomes ``rt<ns>/name``, ``~/x`` becomes
  ``rt<ns><node>/x``, an absolute name stays itself; a service a profile
  replies to publishes ``rr…Reply`` and subscribes ``rq…Request``, one it
  requests the other way round; anything else is denied.

Signing uses the ``openssl`` command (S/MIME, clear-signed).  The files are
laid out per enclave as sros2 lays them out (``enclaves/<path>/cert.pem`` …)."""

from __future__ import annotations

import datetime as dt
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

VERBS = ('publish', 'subscribe', 'reply', 'request')


def ros_name(name: str, ns: str, node: str) -> str:
    """A policy name as the fully qualified ROS name sros2 gives it."""
    ns = ns if ns.endswith('/') else ns + '/'
    if name.startswith('/'):
        return name
    if name.startswith('~'):
        return f'{ns}{node}{name[1:]}'
    return f'{ns}{name}'


def dds_topics(profile: ET.Element) -> tuple[set[str], set[str]]:
    """(DDS topics it may publish, DDS topics it may subscribe) for one policy profile."""
    pub: set[str] = set()
    sub: set[str] = set()
    ns, node = profile.get('ns', '/'), profile.get('node', '')
    for group in profile:
        names = [ros_name(item.text or '', ns, node) for item in group]
        for verb in VERBS:
            if group.get(verb) != 'ALLOW':
                continue
            if verb == 'publish':
                pub |= {f'rt{n}' for n in names}
            elif verb == 'subscribe':
                sub |= {f'rt{n}' for n in names}
            elif verb == 'reply':
                pub |= {f'rr{n}Reply' for n in names}
                sub |= {f'rq{n}Request' for n in names}
            else:
                pub |= {f'rq{n}Request' for n in names}
                sub |= {f'rr{n}Reply' for n in names}
    return pub, sub


def enclave_topics(policy: Path | str, enclave: str) -> tuple[set[str], set[str]]:
    """The union of an enclave's profiles (an enclave is one process)."""
    root = ET.fromstring(Path(policy).read_text()) if isinstance(policy, Path) else ET.fromstring(policy)
    pub: set[str] = set()
    sub: set[str] = set()
    found = False
    for element in root.iter('enclave'):
        if element.get('path') == enclave:
            found = True
            for profile in element.iter('profile'):
                p, s = dds_topics(profile)
                pub |= p
                sub |= s
    if not found:
        raise KeyError(f'no enclave {enclave} in the policy')
    return pub, sub


def permissions_xml(enclave: str, pub: set[str], sub: set[str], domain: int) -> str:
    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0, tzinfo=None)
    rule = [f'<allow_rule><domains><id>{domain}</id></domains>']
    if pub:
        rule.append('<publish><topics>' + ''.join(f'<topic>{escape(t)}</topic>' for t in sorted(pub))
                    + '</topics></publish>')
    if sub:
        rule.append('<subscribe><topics>' + ''.join(f'<topic>{escape(t)}</topic>' for t in sorted(sub))
                    + '</topics></subscribe>')
    rule.append('</allow_rule>')
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<dds><permissions>'
            f'<grant name="{escape(enclave)}"><subject_name>CN={escape(enclave)}</subject_name>'
            f'<validity><not_before>{(now - dt.timedelta(days=1)).isoformat()}</not_before>'
            f'<not_after>{(now + dt.timedelta(days=3650)).isoformat()}</not_after></validity>'
            + ''.join(rule) + '<default>DENY</default></grant></permissions></dds>\n')


def governance_xml(domain: int) -> str:
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<dds><domain_access_rules><domain_rule>'
            f'<domains><id>{domain}</id></domains>'
            '<allow_unauthenticated_participants>false</allow_unauthenticated_participants>'
            '<enable_join_access_control>true</enable_join_access_control>'
            '<discovery_protection_kind>ENCRYPT</discovery_protection_kind>'
            '<liveliness_protection_kind>ENCRYPT</liveliness_protection_kind>'
            '<rtps_protection_kind>ENCRYPT</rtps_protection_kind>'
            '<topic_access_rules><topic_rule><topic_expression>*</topic_expression>'
            '<enable_discovery_protection>true</enable_discovery_protection>'
            '<enable_liveliness_protection>true</enable_liveliness_protection>'
            '<enable_read_access_control>true</enable_read_access_control>'
            '<enable_write_access_control>true</enable_write_access_control>'
            '<metadata_protection_kind>ENCRYPT</metadata_protection_kind>'
            '<data_protection_kind>ENCRYPT</data_protection_kind>'
            '</topic_rule></topic_access_rules></domain_rule></domain_access_rules></dds>\n')


def _openssl(*args: str, cwd: Path) -> None:
    proc = subprocess.run(['openssl', *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if proc.returncode:
        raise RuntimeError(f'openssl {args[0]} failed: {proc.stderr.strip()}')


def _subject(common_name: str) -> str:
    """An openssl ``-subj`` of one common name (an enclave path holds slashes)."""
    return '/CN=' + common_name.replace('\\', '\\\\').replace('/', '\\/')


@dataclass(frozen=True)
class Enclave:
    """One enclave's files: what a participant of that enclave loads."""
    path: str
    folder: Path
    domain: int

    def cyclone_uri(self) -> str:
        """A Cyclone DDS configuration on loopback with this enclave's security."""
        f = self.folder
        return (f'<CycloneDDS><Domain id="{self.domain}">' + _LOOPBACK
                + '<Security><Authentication>'
                f'<IdentityCertificate>file:{f}/cert.pem</IdentityCertificate>'
                f'<IdentityCA>file:{f}/identity_ca.cert.pem</IdentityCA>'
                f'<PrivateKey>file:{f}/key.pem</PrivateKey></Authentication>'
                f'<AccessControl><Governance>file:{f}/governance.p7s</Governance>'
                f'<PermissionsCA>file:{f}/permissions_ca.cert.pem</PermissionsCA>'
                f'<Permissions>file:{f}/permissions.p7s</Permissions></AccessControl>'
                '</Security></Domain></CycloneDDS>')


_LOOPBACK = ('<General><Interfaces><NetworkInterface address="127.0.0.1"/></Interfaces>'
             '<AllowMulticast>false</AllowMulticast></General>'
             '<Discovery><ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>60</MaxAutoParticipantIndex>'
             '<Peers><Peer address="127.0.0.1"/></Peers></Discovery>')


def plain_uri(domain: int) -> str:
    """A Cyclone DDS configuration on loopback with no security: an outsider."""
    return f'<CycloneDDS><Domain id="{domain}">{_LOOPBACK}</Domain></CycloneDDS>'


class Keystore:
    """A CA and its enclaves under ``root``, as ``ros2 security create_keystore`` lays them out."""

    def __init__(self, root: Path, domain: int, ca_name: str = 'safemanip test CA') -> None:
        self.root, self.domain = root, domain
        self.ca = root / 'public'
        self.ca.mkdir(parents=True, exist_ok=True)
        key, cert = self.ca / 'ca.key.pem', self.ca / 'ca.cert.pem'
        _openssl('ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', str(key), cwd=root)
        _openssl('req', '-new', '-x509', '-key', str(key), '-out', str(cert), '-days', '3650',
                 '-subj', _subject(ca_name), cwd=root)
        governance = self.ca / 'governance.xml'
        governance.write_text(governance_xml(domain))
        self._sign(governance, self.ca / 'governance.p7s')

    def _sign(self, document: Path, out: Path) -> None:
        _openssl('smime', '-sign', '-text', '-in', str(document), '-out', str(out),
                 '-signer', str(self.ca / 'ca.cert.pem'), '-inkey', str(self.ca / 'ca.key.pem'), cwd=self.root)

    def enclave(self, path: str, pub: set[str], sub: set[str]) -> Enclave:
        """An identity certificate with ``CN=<path>`` and its signed permissions."""
        folder = self.root / 'enclaves' / path.strip('/')
        folder.mkdir(parents=True, exist_ok=True)
        _openssl('ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', 'key.pem', cwd=folder)
        _openssl('req', '-new', '-key', 'key.pem', '-out', 'req.pem', '-subj', _subject(path), cwd=folder)
        _openssl('x509', '-req', '-in', 'req.pem', '-CA', str(self.ca / 'ca.cert.pem'),
                 '-CAkey', str(self.ca / 'ca.key.pem'), '-CAcreateserial', '-out', 'cert.pem', '-days', '3650',
                 cwd=folder)
        for name in ('identity_ca.cert.pem', 'permissions_ca.cert.pem'):
            (folder / name).write_bytes((self.ca / 'ca.cert.pem').read_bytes())
        (folder / 'governance.p7s').write_bytes((self.ca / 'governance.p7s').read_bytes())
        (folder / 'permissions.xml').write_text(permissions_xml(path, pub, sub, self.domain))
        self._sign(folder / 'permissions.xml', folder / 'permissions.p7s')
        return Enclave(path, folder, self.domain)
