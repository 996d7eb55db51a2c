"""Live carbon providers that misbehave: a body that drips, is cut short, is huge or is not JSON,
a slow history endpoint, and redirects that would carry a credential to another host.

Each case runs a real HTTP server on 127.0.0.1 (port 0) in a thread; ``localhost`` is "another
host" (same machine, another name). The deadline is shortened through ``DEADLINE_S``; the
servers drip for longer than any deadline, so only a deadline ends a case early.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from fakes.carbon_stub import TOKEN, running_stub, stub_env

from mlflow_roofline.core import carbon_live
from mlflow_roofline.core.carbon import over_window, resolve_carbon, resolve_carbon_live

DE_TABLE = resolve_carbon(region="DE").intensity_g_per_kwh
DEADLINE_S = 0.3
ENOUGH_S = 3.0
"""A generous bound on a case that must end at its 0.3 s deadline (the servers drip for 3 s or more)."""
LATEST = json.dumps({"zone": "DE", "carbonIntensity": 123.0}).encode()


class Scripted(http.server.ThreadingHTTPServer):
    """Answers every GET with ``script(handler)``; records each request's path and headers."""

    daemon_threads = True
    block_on_close = False
    script: Callable[[http.server.BaseHTTPRequestHandler], None]
    seen: list[tuple[str, dict[str, str]]]
    stopping: threading.Event


class Handler(http.server.BaseHTTPRequestHandler):
    server: Scripted

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.server.seen.append((self.path, dict(self.headers)))
        try:
            self.server.script(self)
        except OSError:  # the client gave up (its deadline): nothing to answer
            pass


@contextlib.contextmanager
def scripted(script: Callable[[Handler], None], host: str = "127.0.0.1") -> Iterator[Scripted]:
    server = Scripted((host, 0), Handler)
    server.script = script  # type: ignore[assignment]
    server.seen = []
    server.stopping = threading.Event()
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield server
    finally:
        server.stopping.set()
        server.shutdown()
        server.server_close()


def url(server: Scripted, host: str = "127.0.0.1") -> str:
    return f"http://{host}:{server.server_address[1]}"


def em_env(base: str) -> dict[str, str]:
    return {
        "ROOFLINE_CARBON_PROVIDER": "electricitymaps",
        "ELECTRICITYMAPS_API_TOKEN": TOKEN,
        "ROOFLINE_ELECTRICITYMAPS_URL": base,
    }


@pytest.fixture(autouse=True)
def short_deadline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(carbon_live, "DEADLINE_S", DEADLINE_S)
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    carbon_live.clear_cache()
    yield
    carbon_live.clear_cache()


def drip(handler: Handler, data: bytes, every_s: float = 0.05) -> None:
    """Write ``data`` one byte every ``every_s`` seconds (until the test's server stops)."""
    for i in range(len(data)):
        if handler.server.stopping.wait(every_s):
            return
        handler.wfile.write(data[i : i + 1])
        handler.wfile.flush()


def answer(handler: Handler, body: bytes, length: int | None = None, status: int = 200) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body) if length is None else length))
    handler.end_headers()
    handler.wfile.write(body)


def ask(base: str) -> tuple[str, float | None, float]:
    started = time.monotonic()
    settings = resolve_carbon_live(region="DE", env=em_env(base))
    return settings.source or "", settings.intensity_g_per_kwh, time.monotonic() - started


# -- item 4: one deadline for the whole answer, a size cap, every failure falls back ---------
def _drip_body(handler: Handler) -> None:
    body = LATEST + b" " * 60  # valid JSON, dripped over ~3.5 s
    handler.send_response(200)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    drip(handler, body)


def _drip_headers(handler: Handler) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + b"X-Slow: " + b"a" * 60 + b"\r\n"
    drip(handler, head + f"Content-Length: {len(LATEST)}\r\n\r\n".encode() + LATEST)


@pytest.mark.parametrize("script", [_drip_body, _drip_headers], ids=["body", "headers"])
def test_a_dripped_answer_is_cut_off_by_one_wall_clock_deadline(script: Callable[[Handler], None]) -> None:
    with scripted(script) as server:
        source, intensity, took = ask(url(server))
    assert source == f"table:DE (electricitymaps: no answer within {DEADLINE_S:g} s)"
    assert intensity == DE_TABLE
    assert took < ENOUGH_S


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        (lambda h: answer(h, b'{"carbonIntensity": 12', length=1000), "the answer was cut short (22 of 1000 bytes)"),
        (lambda h: answer(h, b"\0" * (1 << 20), length=1_900_000_000), "refused an answer of 1900000000 bytes"),
        (lambda h: answer(h, b"[" * 200_000), "the answer is not JSON"),  # nested past the parser's recursion
        (lambda h: answer(h, b"<html>maintenance</html>"), "the answer is not JSON"),
        (lambda h: answer(h, json.dumps({"carbonIntensity": 10**400}).encode()), "implausible intensity inf"),
    ],
    ids=["cut-short", "huge-length", "deep-json", "html", "huge-int"],
)
def test_a_broken_answer_falls_back_to_the_table_with_the_reason(
    script: Callable[[Handler], None], reason: str
) -> None:
    with scripted(script) as server:
        source, intensity, took = ask(url(server))
    assert source.startswith(f"table:DE (electricitymaps: {reason}")
    assert intensity == DE_TABLE
    assert took < ENOUGH_S


def test_an_answer_without_a_length_is_read_up_to_the_cap_only() -> None:
    padded = json.dumps({"carbonIntensity": 123.0, "pad": "x" * (1 << 20)}).encode()  # valid JSON, 1 MiB

    def close_delimited(handler: Handler) -> None:
        handler.close_connection = True
        handler.send_response(200)
        handler.end_headers()  # no Content-Length: the body runs to the connection's end
        for i in range(0, len(padded), 1 << 16):
            handler.wfile.write(padded[i : i + (1 << 16)])

    with scripted(close_delimited) as server:
        source, intensity, _ = ask(url(server))
    assert source == "table:DE (electricitymaps: refused an answer over the 256 KiB cap (MAX_BODY_BYTES))"
    assert intensity == DE_TABLE


def test_a_slow_history_endpoint_does_not_hold_the_end_of_the_run() -> None:
    hour = 3600.0 * (time.time() // 3600)
    history = json.dumps({"history": [{"carbonIntensity": 900.0, "datetime": "x"}] * 3}).encode()

    def slow_history(handler: Handler) -> None:
        if handler.path.startswith("/v3/carbon-intensity/latest"):
            return answer(handler, LATEST)
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(history)))
        handler.end_headers()
        drip(handler, history)

    with scripted(slow_history) as server:
        settings = resolve_carbon_live(region="DE", env=em_env(url(server)))
        started = time.monotonic()
        with pytest.MonkeyPatch.context() as patch:
            for key, value in em_env(url(server)).items():
                patch.setenv(key, value)
            averaged = over_window(settings, hour, 60.0)
        took = time.monotonic() - started
    assert averaged.intensity_g_per_kwh == 123.0  # the figure at the run's start
    assert took < ENOUGH_S


# -- item 5: a credential never follows a redirect to another host or scheme -----------------
def _redirect_to(location: str, status: int = 302) -> Callable[[Handler], None]:
    def script(handler: Handler) -> None:
        handler.send_response(status)
        handler.send_header("Location", location)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    return script


@pytest.mark.parametrize("provider", ["electricitymaps", "watttime"])
def test_a_redirect_to_another_host_never_receives_the_credential(provider: str) -> None:
    with running_stub() as other:  # speaks both APIs and records every request
        elsewhere = url(other, host="localhost")  # the same machine under another host name
        with scripted(lambda h: _redirect_to(elsewhere + h.path)(h)) as server:
            env = stub_env(other, provider, ROOFLINE_WATTTIME_REGION="CAISO_NORTH")
            env["ROOFLINE_ELECTRICITYMAPS_URL"] = env["ROOFLINE_WATTTIME_URL"] = url(server)
            settings = resolve_carbon_live(region="DE", env=env)
        assert other.calls == []  # nothing reached the other host: no token, no password
    assert server.seen and (server.seen[0][1].get("auth-token") or server.seen[0][1].get("Authorization"))
    assert settings.intensity_g_per_kwh == DE_TABLE
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    assert settings.source == (
        f"table:DE ({provider}: refused a redirect from {origin} to http://localhost:{other.server_address[1]} "
        "(the credential is sent to its own host only))"
    )


def test_a_redirect_to_another_scheme_on_the_same_host_is_refused() -> None:
    def script(handler: Handler) -> None:
        _redirect_to(f"https://127.0.0.1:{handler.server.server_address[1]}{handler.path}", 301)(handler)

    with scripted(script) as server:
        source, _, _ = ask(url(server))
    assert len(server.seen) == 1
    assert "refused a redirect from http://127.0.0.1:" in source and "to https://127.0.0.1:" in source


def test_a_redirect_on_the_same_host_is_followed_with_the_credential() -> None:
    def script(handler: Handler) -> None:
        if handler.path.startswith("/moved"):
            ok = handler.headers.get("auth-token") == TOKEN
            return answer(handler, LATEST) if ok else answer(handler, b"{}", status=401)
        return _redirect_to("/moved" + handler.path, 307)(handler)

    with scripted(script) as server:
        source, intensity, _ = ask(url(server))
    assert (source, intensity) == ("electricitymaps:DE", 123.0)
    assert [path.split("?")[0] for path, _ in server.seen] == [
        "/v3/carbon-intensity/latest",
        "/moved/v3/carbon-intensity/latest",
    ]


def test_endless_redirects_stop() -> None:
    with scripted(_redirect_to("/again")) as server:
        source, _, _ = ask(url(server))
    assert source == f"table:DE (electricitymaps: more than {carbon_live.MAX_REDIRECTS} redirects)"


def test_an_http_proxy_from_the_environment_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    with running_stub() as proxy:  # a forward proxy sees the absolute URL; the stub answers it itself
        monkeypatch.setenv("http_proxy", url(proxy))
        settings = resolve_carbon_live(region="DE", env=em_env("http://carbon.invalid"))
    assert (settings.source, settings.intensity_g_per_kwh) == ("electricitymaps:DE", 123.0)


def test_the_deadline_is_a_parameter_of_each_question() -> None:
    with scripted(_drip_body) as server:
        env = em_env(url(server))
        with pytest.raises(carbon_live.ProviderError, match=r"^electricitymaps: no answer within 0\.2 s$"):
            carbon_live.live_intensity("electricitymaps", "DE", env, deadline_s=0.2)
        started = time.monotonic()
        assert carbon_live.window_intensity("electricitymaps", "DE", 0.0, 60.0, env, deadline_s=0.2) is None
        assert time.monotonic() - started < ENOUGH_S
