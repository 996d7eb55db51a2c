"""End to end: a fit over several GPUs registers one fleet model as @champion, asked in process and by `predict`.

Runs of the weak-scaling fleet (:mod:`mlflow_roofline.testing.weak_fleet`: real GPUs of the shipped
hardware table, a physical machine model) are logged to a real SQLite store and fitted by
``run_fit``; ``models:/fleet-energy@champion`` then answers every measured GPU and a GPU of the
table no run measured, through ``mlflow.pyfunc.load_model`` and through ``mlflow-roofline predict
--hardware``. The second store holds two GPUs at one step count whose energy per FLOP falls with
size (every plain pooled form fails the num_steps check there): its @champion answers the T4
that was left out through a per-step pooled form. HTTP: tests/e2e/test_serve_pooled_http.py.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from support.module_store import module_store

from mlflow_roofline.cli import main
from mlflow_roofline.fit.fit_runs import FitOutcome
from mlflow_roofline.fit.pipeline import run_fit
from mlflow_roofline.testing.synthetic_log import log_runs
from mlflow_roofline.testing.weak_fleet import energy_falling_per_flop, generate_weak_fleet_runs

MODEL = "fleet-energy"
CHAMPION = f"models:/{MODEL}@champion"
MEASURED = ("T4", "V100 SXM2", "A100 SXM4 80GB")
UNMEASURED = "H100 SXM"
JOB = {
    "num_layers": 6,
    "hidden_size": 512,
    "num_heads": 8,
    "ffn_size": 2048,
    "seq_len": 128,
    "batch_size": 16,
    "num_steps": 20,
}
PLACED = {**JOB, "strategy": "ddp", "num_devices": 2}


def _fitted_store(root: Path, template: Path, frame: pd.DataFrame) -> Iterator[FitOutcome]:
    with module_store(root, template):
        client = mlflow.MlflowClient()
        log_runs(client, client.create_experiment("fleet"), frame)
        yield run_fit(["fleet"], model_name=MODEL, alias="champion", echo=lambda *_: None)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, store_template: Path) -> Iterator[FitOutcome]:
    """Three GPUs fitted, the fleet model registered @champion, this module's store current. Two more V100
    runs say bf16, which the V100's row has no peak for: the fit leaves them out, counted."""
    warnings.simplefilter("ignore")
    frame = generate_weak_fleet_runs(8, seed=0, gpus=MEASURED, strategies=("single", "ddp"), device_counts=(2, 4))
    impossible = (
        frame[frame["hardware"] == "V100 SXM2"].head(2).assign(precision="bf16", config_hash="", workload_hash="")
    )
    frame = pd.concat([frame, impossible], ignore_index=True)
    yield from _fitted_store(tmp_path_factory.mktemp("fleet-store"), store_template, frame)


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    sizes = [f"--{key.replace('_', '-')}={value}" for key, value in JOB.items()]
    code = 0
    try:
        main(["predict", *sizes, "--model", CHAMPION, *args])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_champion_answers_every_measured_gpu_and_a_table_gpu_in_process(fleet: FitOutcome) -> None:
    client = mlflow.MlflowClient()
    champion = client.get_model_version_by_alias(MODEL, "champion")
    assert champion.run_id == fleet.parent_run_id and champion.tags["roofline.form"] == "fleet"
    for fit in fleet.fits:  # each GPU's own law keeps its champion-<slug> alias
        own = client.get_model_version_by_alias(MODEL, fit.aliases[0])
        assert fit.aliases == (f"champion-{fit.hardware.lower().replace(' ', '-')}",)
        assert own.tags["roofline.hardware"] == fit.hardware
    model = mlflow.pyfunc.load_model(CHAMPION)
    names = [*MEASURED, UNMEASURED]
    out = model.predict(pd.DataFrame([{**PLACED, "hardware": name} for name in names]))
    assert (out["energy_j"] > 0).all() and out["extrapolated_hardware"].tolist() == [False, False, False, True]
    routes = fleet.fleet.law.routes if fleet.fleet is not None else {}
    expected = [name if routes[name].law == "own" else "pooled" for name in MEASURED]
    assert out["law"].tolist() == [*expected, "pooled"]
    best = model.predict(pd.DataFrame([{**JOB, "hardware": name} for name in names]), params={"mode": "recommend"})
    assert len(best) == len(names) and best["law"].tolist() == out["law"].tolist()


def test_runs_at_a_precision_their_gpu_has_no_peak_for_are_left_out_and_counted(fleet: FitOutcome) -> None:
    reason = "with precision bf16 that V100 SXM2 has no peak for in the hardware table"
    assert fleet.run_data.dropped == {reason: 2} and f"dropped 2: 2 {reason}" in fleet.run_data.summary()
    for fit in fleet.fits:  # each hardware's fit run counts the pull's drops
        assert mlflow.MlflowClient().get_run(fit.run_id).data.metrics["n_runs_dropped_pull"] == 2.0
    assert all(law.precisions == ["fp16"] for law in fleet.fleet.law.hardware_laws.values())  # type: ignore[union-attr]


def test_route_metrics_say_which_law_answers_each_gpu_with_both_errors(fleet: FitOutcome) -> None:
    metrics = mlflow.MlflowClient().get_run(str(fleet.parent_run_id)).data.metrics
    for slug in ("t4", "v100-sxm2", "a100-sxm4-80gb"):
        assert metrics[f"route_{slug}"] in (0.0, 1.0)
        own, pooled = metrics[f"route_own_mape_{slug}"], metrics[f"route_pooled_mape_{slug}"]
        assert 0 < own < 100 and 0 < pooled < 100
        assert metrics[f"route_{slug}"] == float(own <= pooled)
    assert metrics["fleet_answers_unmeasured"] == 1.0


def test_an_unknown_gpu_is_refused_by_name_with_the_measured_list(fleet: FitOutcome) -> None:
    model = mlflow.pyfunc.load_model(CHAMPION)
    with pytest.raises(mlflow.exceptions.MlflowException) as refused:
        model.predict(pd.DataFrame([{**PLACED, "hardware": "Abacus"}]))
    message = refused.value.message
    assert "unknown hardware 'Abacus'" in message and all(name in message for name in MEASURED)
    assert "every GPU of the hardware table" in message


def test_predict_hardware_reaches_every_gpu_through_the_cli(
    fleet: FitOutcome, capsys: pytest.CaptureFixture[str]
) -> None:
    model = mlflow.pyfunc.load_model(CHAMPION)
    for name in [*MEASURED, UNMEASURED]:
        code, out, err = _cli(capsys, "--hardware", name, "--strategy", "ddp", "--num-devices", "2", "--json")
        assert code == 0, err
        expected = model.predict(pd.DataFrame([{**PLACED, "hardware": name}]))
        answer = json.loads(out)
        assert answer["energy_j"] == pytest.approx(expected["energy_j"].iloc[0], rel=1e-12)
        assert answer["law"] == expected["law"].iloc[0]
    code, out, err = _cli(capsys, "--hardware", UNMEASURED, "--strategy", "ddp", "--num-devices", "2")
    assert code == 0 and "the pooled law over the measured GPUs" in out, err
    code, out, err = _cli(capsys, "--hardware", UNMEASURED, "--recommend", "--max-devices", "4")
    assert code == 0 and f"hardware: {UNMEASURED}" in out, err
    code, _, err = _cli(capsys, "--hardware", "Abacus", "--strategy", "ddp", "--num-devices", "2")
    assert code == 2 and "unknown hardware 'Abacus'" in err and "T4" in err


def test_predict_precision_moves_the_answer_where_the_tables_peak_differs(
    fleet: FitOutcome, capsys: pytest.CaptureFixture[str]
) -> None:
    model = mlflow.pyfunc.load_model(CHAMPION)
    placed = ("--strategy", "ddp", "--num-devices", "2", "--json")
    energy: dict[str, float] = {}
    for name, precision in ((UNMEASURED, "bf16"), (UNMEASURED, "fp32"), ("A100 SXM4 80GB", "fp32")):
        code, out, err = _cli(capsys, "--hardware", name, *placed, "--precision", precision)
        assert code == 0, err
        answer = json.loads(out)
        expected = model.predict(pd.DataFrame([{**PLACED, "hardware": name, "precision": precision}]))
        assert answer["energy_j"] == pytest.approx(expected["energy_j"].iloc[0], rel=1e-12)
        assert answer["law"] == "pooled" and answer["extrapolated_hardware"]
        energy[f"{name} {precision}"] = answer["energy_j"]
    code, out, err = _cli(capsys, "--hardware", UNMEASURED, *placed)  # the law's fp16: the H100's bf16 peak
    assert code == 0 and json.loads(out)["energy_j"] == pytest.approx(energy[f"{UNMEASURED} bf16"], rel=1e-12)
    # 67 TFLOP/s, not 989: the compute part of the cost grows 14.8x; memory and per-token parts do not
    assert energy[f"{UNMEASURED} fp32"] > 2 * energy[f"{UNMEASURED} bf16"]
    code, _, err = _cli(capsys, "--hardware", "T4", *placed, "--precision", "bf16")
    assert code == 2 and "precision (row 0): hardware 'T4' (T4) has no bf16 peak" in err


@pytest.fixture(scope="module")
def left_out(tmp_path_factory: pytest.TempPathFactory, store_template: Path) -> Iterator[FitOutcome]:
    """Two GPUs at one step count, energy ~ FLOPs per step ^ 0.8 (the T4 left out), fitted and registered."""
    warnings.simplefilter("ignore")
    gpus = ("V100 SXM2", "A100 SXM4 80GB")
    frame = generate_weak_fleet_runs(
        10, seed=0, steps=(20,), gpus=gpus, strategies=("single", "ddp"), device_counts=(2, 4)
    )
    frame = energy_falling_per_flop(frame, 0.8)
    yield from _fitted_store(tmp_path_factory.mktemp("left-out-store"), store_template, frame)


def test_with_one_gpu_left_out_a_per_step_pooled_form_passes_and_champion_answers_it(left_out: FitOutcome) -> None:
    metrics = mlflow.MlflowClient().get_run(str(left_out.parent_run_id)).data.metrics
    assert metrics["pooled_sane_hardware_intercepts"] == 0.0 and metrics["pooled_sane_hardware_offset"] == 0.0
    assert metrics["pooled_sane_hardware_offset_per_step"] == 1.0 and metrics["fleet_answers_unmeasured"] == 1.0
    out = mlflow.pyfunc.load_model(CHAMPION).predict(pd.DataFrame([{**PLACED, "hardware": "T4"}]))
    assert out["law"].iloc[0] == "pooled" and bool(out["extrapolated_hardware"].iloc[0])
    assert out["energy_j"].iloc[0] > 0
