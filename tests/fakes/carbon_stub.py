"""A loopback HTTP stub of Electricity Maps' and WattTime's v3 APIs, speaking their documented JSON.

Electricity Maps: ``/v3/carbon-intensity/latest`` and ``/history`` (``?zone=``, header
``auth-token``; ``carbonIntensity`` g/kWh, ``datetime``). WattTime: ``/login`` (basic auth,
``{"token"}``) and ``/v3/forecast`` (bearer token; ``data[].value`` in ``lbs_co2_per_mwh``).
"""

from __future__ import annotations

import base64
import contextlib
import http.server
import json
import threading
import time
import urllib.parse
from collections.abc import Iterator

TOKEN = "em-token"


class Stub(http.server.ThreadingHTTPServer):
    """Serves the documented shapes; ``status`` forces an error code; ``calls`` counts requests."""

    latest = 123.0
    history: list[tuple[float, float]] = []
    moer_lbs_per_mwh = 1000.0
    status: int | None = None
    calls: list[str]


class Handler(http.server.BaseHTTPRequestHandler):
    server: Stub

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def _send(self, code: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        url = urllib.parse.urlparse(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        self.server.calls.append(url.path)
        if self.server.status is not None:
            return self._send(self.server.status, {"message": "refused"})
        if url.path.startswith("/v3/carbon-intensity/"):
            if self.headers.get("auth-token") != TOKEN:
                return self._send(401, {"message": "Invalid auth-token"})
            point = {"zone": query["zone"], "emissionFactorType": "lifecycle", "isEstimated": False}
            if url.path.endswith("/latest"):
                return self._send(200, {**point, "carbonIntensity": self.server.latest, "datetime": _iso(time.time())})
            history = [{**point, "carbonIntensity": v, "datetime": _iso(t)} for t, v in self.server.history]
            return self._send(200, {"zone": query["zone"], "history": history})
        if url.path == "/login":
            expected = "Basic " + base64.b64encode(b"wt-user:wt-pass").decode()
            if self.headers.get("Authorization") != expected:
                return self._send(403, {"error": "bad credentials"})
            return self._send(200, {"token": "wt-token"})
        if url.path == "/v3/forecast":
            if self.headers.get("Authorization") != "Bearer wt-token" or query.get("signal_type") != "co2_moer":
                return self._send(403, {"error": "not in plan"})
            meta = {"region": query["region"], "signal_type": "co2_moer", "units": "lbs_co2_per_mwh"}
            data = [{"point_time": _iso(time.time()), "value": self.server.moer_lbs_per_mwh}]
            return self._send(200, {"data": data, "meta": meta})
        return self._send(404, {"message": "no such endpoint"})


def _iso(unix_s: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(unix_s))


@contextlib.contextmanager
def running_stub() -> Iterator[Stub]:
    server = Stub(("127.0.0.1", 0), Handler)
    server.calls = []
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)  # shutdown() waits a poll
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def stub_env(stub: Stub, provider: str = "electricitymaps", **extra: str) -> dict[str, str]:
    """The environment that points both providers at ``stub`` with good credentials."""
    base = f"http://127.0.0.1:{stub.server_address[1]}"
    return {
        "ROOFLINE_CARBON_PROVIDER": provider,
        "ELECTRICITYMAPS_API_TOKEN": TOKEN,
        "ROOFLINE_ELECTRICITYMAPS_URL": base,
        "WATTTIME_USERNAME": "wt-user",
        "WATTTIME_PASSWORD": "wt-pass",
        "ROOFLINE_WATTTIME_URL": base,
        **extra,
    }
