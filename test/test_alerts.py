"""Alert sinks (safemanip_ros/supervisor/alerts.py) against a real HTTP
server on 127.0.0.1 that answers, fails, and hangs: submitting never waits
for a sink, a failing webhook is retried with back-off, alerts are
deduplicated and rate-limited, and a hanging webhook delays neither the
JSON-lines sink nor the caller."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import wait_for

from safemanip_ros.errors import SpecError
from safemanip_ros.supervisor.alerts import AlertConfig, AlertDispatcher, JsonLinesSink, WebhookSink


class Hook:
    """A local webhook: ``mode`` 'ok', 'fail N' (HTTP 500 N times, then 200), 'hang' (until released),
    'redirect' (302 to /elsewhere, which answers 200 to anything) or 'trickle' (a 200 answer a byte a second)."""

    def __init__(self, mode: str) -> None:
        self.mode, self.received, self.gets, self.release = mode, [], [], threading.Event()
        self.failures_left = int(mode.split()[1]) if mode.startswith('fail') else 0
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
                hook.received.append(body)
                if hook.mode == 'hang':
                    hook.release.wait(30)
                if hook.mode == 'redirect' and self.path == '/hook':
                    self.send_response(302)
                    self.send_header('Location', '/elsewhere')
                    self.end_headers()
                    return
                if hook.mode == 'trickle':
                    for byte in b'HTTP/1.1 200 OK\r\n\r\n':
                        if hook.release.wait(1.0):
                            return
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                    return
                status = 200
                if hook.failures_left > 0:
                    hook.failures_left -= 1
                    status = 500
                self.send_response(status)
                self.end_headers()

            def do_GET(self) -> None:
                hook.gets.append(self.path)
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.url = f'http://127.0.0.1:{self.server.server_address[1]}/hook'
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def _alert(i: int) -> dict:
    return {'type': 'violation', 'property': 'no_forbidden_contact', 'instance': f'i{i}', 'severity': 'error'}


@pytest.fixture()
def hook(request):
    h = Hook(request.param)
    yield h
    h.close()


@pytest.mark.parametrize('hook', ['fail 2'], indirect=True)
def test_a_failing_webhook_is_retried_until_it_takes_the_alert(hook):
    cfg = AlertConfig(webhook_url=hook.url, backoff_s=0.01, min_interval_s=0.0)
    d = AlertDispatcher.from_config(cfg)
    try:
        assert d.submit(_alert(1), 'ep/i1/10', 'no_forbidden_contact')
        assert not d.submit(_alert(1), 'ep/i1/10', 'no_forbidden_contact')       # the same rollout: once
        assert wait_for(lambda: d.stats()['webhook'].delivered == 1)
        assert len(hook.received) == 3 and d.stats()['webhook'].retries == 2
        assert hook.received[-1] == _alert(1)
    finally:
        d.close()


@pytest.mark.slow
@pytest.mark.parametrize('hook', ['hang'], indirect=True)
def test_a_hanging_webhook_delays_neither_the_caller_nor_another_sink(hook, tmp_path):
    cfg = AlertConfig(jsonl=str(tmp_path / 'alerts.jsonl'), webhook_url=hook.url, webhook_timeout_s=30.0,
                      min_interval_s=0.0, queue=16)
    d = AlertDispatcher.from_config(cfg)
    try:
        for i in range(40):                 # while the webhook holds its first request
            assert d.submit(_alert(i), f'k{i}', f's{i}')     # returns while the server still holds request 1
            # The JSON-lines sink keeps taking each alert while the webhook hangs.
            assert wait_for(lambda: d.stats()['jsonl'].delivered == i + 1), i
        lines = (tmp_path / 'alerts.jsonl').read_text().splitlines()
        assert [json.loads(line)['instance'] for line in lines] == [f'i{i}' for i in range(40)]
        assert wait_for(lambda: len(hook.received) == 1)
        stats = d.stats()['webhook']
        assert stats.delivered == 0 and stats.dropped == 40 - 1 - 16       # one in flight, 16 queued
    finally:
        hook.release.set()
        d.close()


def test_alerts_are_rate_limited_per_subject_and_held_ones_are_sent_later(tmp_path):
    """Within min_interval_s of a subject's last alert, alerts are held; once
    it has passed the newest held one is sent saying how many others it
    stands for; closing sends what is still held: none is lost quietly."""
    now = [0.0]
    cfg = AlertConfig(jsonl=str(tmp_path / 'a.jsonl'), min_interval_s=1.0)
    d = AlertDispatcher(cfg, cfg.sinks(), clock=lambda: now[0], flush_period_s=None)
    try:
        assert d.submit(_alert(1), 'k1', 'p')
        now[0] = 0.5
        assert not d.submit(_alert(2), 'k2', 'p') and not d.submit(_alert(3), 'k3', 'p')
        assert d.submit(_alert(4), 'k4', 'q')              # another subject is not limited
        assert d.flush_due() == 0                          # p's interval has not passed
        now[0] = 1.2
        assert d.flush_due() == 1                          # i3 goes, standing for i2 too
        assert not d.submit(_alert(5), 'k5', 'p')          # held: i3 just went
        assert wait_for(lambda: d.stats()['jsonl'].delivered == 3)
    finally:
        d.close()                                          # sends i5
    docs = [json.loads(line) for line in (tmp_path / 'a.jsonl').read_text().splitlines()]
    assert [doc['instance'] for doc in docs] == ['i1', 'i4', 'i3', 'i5']
    assert docs[2]['suppressed'] == 1 and 'suppressed' not in docs[3]


def test_a_held_alert_goes_out_on_its_own_once_the_interval_passed(tmp_path):
    """The second violation inside min_interval_s arrives without waiting for a third."""
    cfg = AlertConfig(jsonl=str(tmp_path / 'a.jsonl'), min_interval_s=0.3)
    d = AlertDispatcher.from_config(cfg)
    try:
        assert d.submit(_alert(1), 'k1', 'p') and not d.submit(_alert(2), 'k2', 'p')
        assert wait_for(lambda: d.stats()['jsonl'].delivered == 2, 20.0)
    finally:
        d.close()
    assert [json.loads(ln)['instance'] for ln in (tmp_path / 'a.jsonl').read_text().splitlines()] == ['i1', 'i2']


@pytest.mark.parametrize('hook', ['ok'], indirect=True)
def test_sinks_on_their_own(hook, tmp_path):
    WebhookSink(hook.url).send({'a': 1})
    assert hook.received == [{'a': 1}]
    with pytest.raises(OSError):
        WebhookSink('http://127.0.0.1:9/none', timeout_s=1.0).send({'a': 1})      # refused
    JsonLinesSink(tmp_path / 'x' / 'y.jsonl').send({'b': 2})
    assert json.loads((tmp_path / 'x' / 'y.jsonl').read_text()) == {'b': 2}


def test_alert_configuration_is_checked():
    assert AlertConfig.from_mapping(None).sinks() == []
    cfg = AlertConfig.from_mapping({'jsonl': 'a.jsonl', 'webhook': {'url': 'http://h/x', 'timeout_s': 1}})
    assert [s.name for s in cfg.sinks()] == ['jsonl', 'webhook']
    for bad, words in (({'webhok': {}}, "alerts: unknown field 'webhok'"),
                       ({'webhook': {'url': 'ftp://x'}}, "alerts.webhook.url: expected an http:// or https:// URL"),
                       ({'queue': 0}, 'alerts.queue: must be >= 1'), ({'queue': 'x'}, 'alerts.queue: expected an integer'),
                       ({'min_interval_s': -1}, 'alerts.min_interval_s: must be >= 0'), (5, 'expected a mapping'),
                       ({}, 'alerts: no sink: give jsonl'), ({'min_interval_s': 1}, 'alerts: no sink'),
                       ({'jsonl': ''}, 'alerts.jsonl: an empty path'), ({'jsonl': '  '}, 'alerts.jsonl: an empty path'),
                       ({'jsonl': '/tmp'}, "alerts.jsonl: '/tmp' is a folder"),
                       ({'jsonl': '/etc/passwd/alerts.jsonl'}, "alerts.jsonl: .* cannot be made: '/etc/passwd' is not"),
                       ({'webhook': {'url': 'http://h/x', 'timeout_s': 0}}, 'alerts.webhook.timeout_s: must be >='),
                       ({'webhook': {'url': 'http://127.0.0.1:99999/x'}}, 'alerts.webhook.url: .* out of range'),
                       ({'webhook': {'url': 'http://127.0.0.1:0/x'}}, 'alerts.webhook.url: .* port 0'),
                       ({'webhook': {'url': 'http:///x'}}, 'alerts.webhook.url: .* names no host')):
        with pytest.raises(SpecError, match=words):
            AlertConfig.from_mapping(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize('hook', ['redirect'], indirect=True)
def test_a_redirect_is_not_delivery_and_is_never_followed(hook):
    """A 302 would have urllib re-send the alert as a bodiless GET elsewhere and count it delivered."""
    failures = []
    cfg = AlertConfig(webhook_url=hook.url, retries=1, backoff_s=0.01, min_interval_s=0.0)
    d = AlertDispatcher.from_config(cfg, on_failure=lambda sink, why, stats: failures.append((sink, why)))
    try:
        d.submit(_alert(1), 'k1', 'p')
        assert wait_for(lambda: d.stats()['webhook'].failed == 1)
        assert d.stats()['webhook'].delivered == 0 and hook.gets == [] and len(hook.received) == 2
        assert failures and failures[0][0] == 'webhook' and "HTTP 302 redirect to '/elsewhere'" in failures[0][1]
    finally:
        d.close()


@pytest.mark.slow
@pytest.mark.parametrize('hook', ['trickle'], indirect=True)
def test_a_server_that_trickles_its_answer_is_cut_off_at_the_deadline(hook):
    sink = WebhookSink(hook.url, timeout_s=1.5)
    start = time.monotonic()
    with pytest.raises(OSError, match='no complete answer within 1.5 s'):
        sink.send({'a': 1})
    assert time.monotonic() - start < 10.0      # the answer alone would take 19 s


def test_a_failing_sink_is_said_through_the_failure_hook(tmp_path):
    failures = []
    cfg = AlertConfig(webhook_url='http://127.0.0.1:9/none', retries=0, min_interval_s=0.0)
    d = AlertDispatcher.from_config(cfg, on_failure=lambda sink, why, stats: failures.append((sink, why, stats)))
    try:
        d.submit(_alert(1), 'k1', 'p')
        assert wait_for(lambda: bool(failures))
        assert failures[0][0] == 'webhook' and 'given up after 1 attempt(s): http://127.0.0.1:9/none' in failures[0][1]
        assert d.stats()['webhook'].last_error
        assert failures[0][2]['webhook'].failed == 1      # every sink's counts come with the failure
    finally:
        d.close()
