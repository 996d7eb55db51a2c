"""Live carbon intensity against a loopback HTTP stub that speaks Electricity Maps' and WattTime's v3 JSON."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from fakes.carbon_stub import TOKEN, Stub, running_stub, stub_env

from mlflow_roofline.core import carbon_live
from mlflow_roofline.core.carbon import carbon_tags, over_window, resolve_carbon, resolve_carbon_live
from mlflow_roofline.core.errors import ConfigError

DE_TABLE = resolve_carbon(region="DE").intensity_g_per_kwh


@pytest.fixture
def stub() -> Iterator[Stub]:
    carbon_live.clear_cache()
    with running_stub() as server:
        yield server
    carbon_live.clear_cache()


_env = stub_env


def test_electricitymaps_gives_the_intensity_and_the_source_names_the_zone(stub: Stub) -> None:
    settings = resolve_carbon_live(region="eu-central-1", env=_env(stub))  # an AWS region: its grid, DE
    assert settings.intensity_g_per_kwh == 123.0
    assert carbon_tags(settings)["roofline.carbon_source"] == "electricitymaps:DE"


def test_answers_are_cached_per_zone(stub: Stub) -> None:
    env = _env(stub)
    resolve_carbon_live(region="DE", env=env)
    stub.latest = 500.0
    assert resolve_carbon_live(region="DE", env=env).intensity_g_per_kwh == 123.0
    assert resolve_carbon_live(region="FR", env=env).intensity_g_per_kwh == 500.0
    assert stub.calls == ["/v3/carbon-intensity/latest"] * 2


@pytest.mark.parametrize(
    ("status", "extra", "reason"),
    [
        (None, {"ELECTRICITYMAPS_API_TOKEN": "wrong"}, "electricitymaps: HTTP 401"),
        (503, {}, "electricitymaps: HTTP 503"),
        (None, {"ELECTRICITYMAPS_API_TOKEN": ""}, "electricitymaps: ELECTRICITYMAPS_API_TOKEN is not set"),
    ],
)
def test_a_refusing_provider_falls_back_to_the_table_with_the_reason(
    stub: Stub, status: int | None, extra: dict[str, str], reason: str
) -> None:
    stub.status = status
    settings = resolve_carbon_live(region="DE", env=_env(stub, **extra))
    assert settings.intensity_g_per_kwh == DE_TABLE
    assert settings.source == f"table:DE ({reason})"


def test_an_unreachable_provider_falls_back_quickly(stub: Stub) -> None:
    env = _env(stub)
    stub.shutdown()
    stub.server_close()
    started = time.monotonic()
    settings = resolve_carbon_live(region="DE", env=env)
    assert time.monotonic() - started < 5.0
    assert settings.intensity_g_per_kwh == DE_TABLE
    assert settings.source.startswith("table:DE (electricitymaps: unreachable")


def test_a_provider_that_never_answers_is_cut_off_by_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # accepts the connection, never answers
    monkeypatch.setattr(carbon_live, "DEADLINE_S", 0.3)
    carbon_live.clear_cache()
    env = {
        "ROOFLINE_CARBON_PROVIDER": "electricitymaps",
        "ELECTRICITYMAPS_API_TOKEN": TOKEN,
        "ROOFLINE_ELECTRICITYMAPS_URL": f"http://127.0.0.1:{silent.getsockname()[1]}",
    }
    try:
        settings = resolve_carbon_live(region="DE", env=env)
    finally:
        silent.close()
    assert settings.source == "table:DE (electricitymaps: no answer within 0.3 s)"


def test_watttime_logs_in_and_converts_the_moer_to_grams_per_kwh(stub: Stub) -> None:
    settings = resolve_carbon_live(env=_env(stub, "watttime", ROOFLINE_WATTTIME_REGION="CAISO_NORTH"))
    assert settings.intensity_g_per_kwh == pytest.approx(453.59237)
    assert settings.source == "watttime:CAISO_NORTH"
    assert stub.calls == ["/login", "/v3/forecast"]


def test_watttime_without_a_region_or_with_bad_credentials_says_why(stub: Stub) -> None:
    unknown = resolve_carbon_live(env=_env(stub, "watttime"))
    assert unknown.intensity_g_per_kwh is None
    assert "ROOFLINE_WATTTIME_REGION" in carbon_tags(unknown)["roofline.carbon_unknown"]
    refused = resolve_carbon_live(
        region="US", env=_env(stub, "watttime", ROOFLINE_WATTTIME_REGION="PJM", WATTTIME_PASSWORD="nope")
    )
    assert refused.source == "table:US (watttime: HTTP 403)"


def test_explicit_intensity_wins_and_table_or_offline_callers_never_ask(stub: Stub) -> None:
    env = _env(stub)
    assert resolve_carbon_live(carbon_intensity=42, region="DE", env=env).source == "option"
    assert resolve_carbon(region="DE", env=env).source == "table:DE"  # the served model's path
    assert resolve_carbon_live(region="DE", env={**env, "ROOFLINE_CARBON_PROVIDER": "table"}).source == "table:DE"
    assert stub.calls == []
    with pytest.raises(ConfigError, match="carbon_provider"):
        resolve_carbon_live(region="DE", env={"ROOFLINE_CARBON_PROVIDER": "grid-oracle"})


def test_the_intensity_is_averaged_over_the_window_where_history_covers_it(
    stub: Stub, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = _env(stub)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    hour = 3600.0 * (time.time() // 3600) - 7200.0
    stub.history = [(hour, 100.0), (hour + 3600.0, 300.0)]
    settings = resolve_carbon_live(region="DE", env=env)
    # 30 min in the first hour, 60 min in the second: (0.5 * 100 + 1 * 300) / 1.5
    averaged = over_window(settings, hour + 1800.0, 5400.0)
    assert averaged.intensity_g_per_kwh == pytest.approx(350.0 / 1.5)
    assert averaged.source == "electricitymaps:DE"
    # A window the history does not reach keeps the intensity at the run's start.
    assert over_window(settings, hour + 3 * 3600.0, 10.0).intensity_g_per_kwh == 123.0


def test_predict_carbon_now_asks_once_and_passes_the_intensity_on(
    stub: Stub, monkeypatch: pytest.MonkeyPatch, tracking_uri: str
) -> None:
    from click.testing import CliRunner

    from mlflow_roofline.commands.predict import predict_command

    for key, value in _env(stub).items():
        monkeypatch.setenv(key, value)
    stub.latest = 234.0
    job = ["--num-layers", "2", "--hidden-size", "64", "--num-heads", "2", "--ffn-size", "128"]
    job += ["--seq-len", "16", "--batch-size", "4", "--num-steps", "10", "--model", "models:/absent@champion"]
    result = CliRunner().invoke(predict_command, [*job, "--region", "DE", "--carbon-now"])
    assert "carbon intensity now: 234 g CO2e/kWh (electricitymaps:DE)" in result.output
    assert stub.calls == ["/v3/carbon-intensity/latest"]
