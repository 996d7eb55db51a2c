"""`mlflow-roofline import`: foreign measurements become train runs the fit uses, once each."""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from mlflow_roofline.cli import main
from mlflow_roofline.core.bounds import POWER_BOUND, TIME_BOUND
from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.proxies import proxy_metrics
from mlflow_roofline.core.schema import (
    LAW_INPUT_NAMES,
    M_ENERGY_J,
    M_TIME_S,
    TAG_CONFIG_HASH,
    TAG_ENERGY_SOURCE,
    TAG_HARDWARE,
    TAG_IMPORT_ROW,
    TAG_RUN_TYPE,
    TAG_SOURCE,
)
from mlflow_roofline.fit.runs.run_data import load_train_runs
from mlflow_roofline.tracking.client import TrackingClient

GPU = "NVIDIA A100-SXM4-80GB"
# The law's inputs, num_layers as `layers` (the mapping renames it), then the rest of a measurement.
HEADER = ["layers", *LAW_INPUT_NAMES[1:], "device", "precision", "energy_source", "kwh", "minutes"]
ROWS = [
    [12, 768, 12, 3072, 128, 32, 1000, "single", 1, "cuda", "fp16", "nvml", 0.5, 30],
    [12, 768, 12, 3072, 128, 32, 1000, "ddp", 4, "cuda", "fp16", "nvml", 0.7, 10],
    # tensor parallel over 8 devices with 12 heads: another TP implementation measured it honestly
    [12, 768, 12, 3072, 128, 32, 1000, "tp", 8, "cuda", "fp16", "nvml", 0.9, 9],
]
UNITS = "units: {energy: kWh, time: min}\n"
MAPPING = f"""
columns: {{layers: num_layers, kwh: energy_j, minutes: time_s}}
units: {{energy: kWh, time: min}}
constants: {{hardware: "{GPU}"}}
"""


def write_csv(path: Path, rows: list[list[object]], header: list[str] = HEADER) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def run_cli(args: list[str]) -> int:
    """The exit status of ``mlflow-roofline ARGS`` (main returns normally on success)."""
    try:
        main(args)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def imported_runs(experiment: str = "imported") -> list:
    client = MlflowClient()
    exp = client.get_experiment_by_name(experiment)
    return [] if exp is None else client.search_runs([exp.experiment_id], max_results=1000)


def test_table_with_mapping_becomes_finished_train_runs(tracking_uri: str, tmp_path: Path) -> None:
    data = write_csv(tmp_path / "runs.csv", ROWS)
    (tmp_path / "map.yaml").write_text(MAPPING)
    assert run_cli(["import", str(data), "--experiment", "imported", "--mapping", str(tmp_path / "map.yaml")]) == 0

    runs = {r.data.params["strategy"]: r for r in imported_runs()}
    assert set(runs) == {"single", "ddp", "tp"}
    ddp = runs["ddp"]
    assert ddp.info.status == "FINISHED"
    assert ddp.data.tags[TAG_RUN_TYPE] == "train"
    assert ddp.data.tags[TAG_SOURCE] == "import:table"
    assert ddp.data.tags[TAG_HARDWARE] == GPU
    assert ddp.data.tags[TAG_ENERGY_SOURCE] == "nvml"
    assert ddp.data.tags[TAG_IMPORT_ROW] == "line 3"
    assert ddp.data.metrics[M_ENERGY_J] == pytest.approx(0.7 * 3.6e6)
    assert ddp.data.metrics[M_TIME_S] == pytest.approx(600.0)
    config = TrainConfig(12, 768, 12, 3072, 128, 32, 1000, 0, "ddp", 4, "cuda", "fp16")
    assert ddp.data.tags[TAG_CONFIG_HASH] == config.config_hash(GPU)
    for name, value in proxy_metrics(config).items():
        assert ddp.data.metrics[name] == pytest.approx(value)


def test_importing_the_same_file_twice_adds_nothing(tracking_uri: str, tmp_path: Path, capsys) -> None:
    data = write_csv(tmp_path / "runs.csv", ROWS)
    (tmp_path / "map.yaml").write_text(MAPPING)
    args = ["import", str(data), "--experiment", "imported", "--mapping", str(tmp_path / "map.yaml")]
    assert run_cli(args) == 0
    capsys.readouterr()
    assert run_cli(args) == 0
    assert "imported 0, skipped 3 already present, refused 0" in capsys.readouterr().out
    assert len(imported_runs()) == 3


def test_bad_rows_are_named_by_line_and_field_and_the_rest_imported(tracking_uri: str, tmp_path: Path, capsys) -> None:
    rows = [
        ROWS[0],
        [12, 768, 12, 3072, 128, "thirty-two", 1000, "ddp", 4, "cuda", "fp16", "nvml", 0.7, 10],  # line 3
        [12, 768, 12, 3072, 128, 32, 1000, "zero3", 4, "cuda", "fp16", "nvml", 0.7, 10],  # line 4
        [12, 768, 12, 3072, 128, 32, 1000, "single", 2, "cuda", "fp16", "nvml", 0.7, 10],  # line 5
        [12, 768, 12, 3072, 128, 32, 1000, "ddp", 4, "cuda", "fp16", "nvml", "inf", 10],  # line 6
        [12, 768, 12, 3072, 128, 32, 1000, "ddp", 4, "cuda", "fp16", "nvml", -1, 10],  # line 7
        [12, 768, 12, 3072, 128, 32, 1000, "ddp", 4, "cuda", "fp16", "nvml", 0.7, 1e9],  # line 8: 1900 years
        [12, 768, 12, 3072, 128, 32, 1000, "ddp", 4, "cuda", "fp16", "nvml", 100, 10],  # line 9: 150 kW a device
        ROWS[1],
    ]
    data = write_csv(tmp_path / "runs.csv", rows)
    (tmp_path / "map.yaml").write_text(MAPPING)
    code = run_cli(["import", str(data), "--experiment", "imported", "--mapping", str(tmp_path / "map.yaml")])
    out = capsys.readouterr()
    assert code == 1
    assert "refused line 3: batch_size: must be an integer, got 'thirty-two'" in out.err
    assert "refused line 4: strategy: must be one of single, ddp, fsdp, tp, got 'zero3'" in out.err
    assert "refused line 5: num_devices: must be 1 under strategy single, got 2" in out.err
    assert "refused line 6: energy_j: must be finite and positive" in out.err
    assert "refused line 7: energy_j: must be finite and positive" in out.err
    # The physical bounds are the fit's (core.bounds): the message names the field and the bound.
    assert f"refused line 8: time_s: must lie within {TIME_BOUND.interval}: {TIME_BOUND.why}; got 6e+10 s" in out.err
    assert (
        f"refused line 9: energy_j: must lie within {POWER_BOUND.interval} (the average power it implies): "
        f"{POWER_BOUND.why}; got 150000 W per device" in out.err
    )
    assert "imported 2, skipped 0 already present, refused 7" in out.out
    assert len(imported_runs()) == 2


def test_missing_hardware_is_refused_naming_the_fix(tracking_uri: str, tmp_path: Path, capsys) -> None:
    """A required column missing from the file is one file-level line (exit 2), not one line per row."""
    data = write_csv(tmp_path / "runs.csv", ROWS)
    (tmp_path / "map.yaml").write_text("columns: {layers: num_layers, kwh: energy_j, minutes: time_s}\n")
    assert run_cli(["import", str(data), "--experiment", "imported", "--mapping", str(tmp_path / "map.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "line 2" not in err
    assert (
        "file: runs.csv has no column hardware, required in every row: add a column, or a constant in the mapping"
        in err
    )
    assert imported_runs() == []


def test_several_missing_columns_are_one_line(tracking_uri: str, tmp_path: Path, capsys) -> None:
    data = write_csv(tmp_path / "runs.csv", [row[:5] + row[6:12] for row in ROWS], HEADER[:5] + HEADER[6:12])
    assert run_cli(["import", str(data), "--experiment", "imported"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "has no column num_layers, batch_size (or per_device_batch_size), energy_j, time_s, hardware," in err


def test_a_missing_cell_is_still_refused_by_line(tracking_uri: str, tmp_path: Path, capsys) -> None:
    rows = [[*row, GPU if i != 1 else ""] for i, row in enumerate(ROWS)]
    data = write_csv(tmp_path / "runs.csv", rows, [*HEADER, "hardware"])
    (tmp_path / "map.yaml").write_text("columns: {layers: num_layers, kwh: energy_j, minutes: time_s}\n" + UNITS)
    assert run_cli(["import", str(data), "--experiment", "imported", "--mapping", str(tmp_path / "map.yaml")]) == 1
    assert "refused line 3: hardware: is missing: add a column, or a constant in the mapping" in capsys.readouterr().err
    assert len(imported_runs()) == 2


def test_unknown_columns_are_ignored_with_one_warning_or_refused_under_strict(
    tracking_uri: str, tmp_path: Path, capsys
) -> None:
    rows = [[*row, "sst2", f"note {i}"] for i, row in enumerate(ROWS)]
    data = write_csv(tmp_path / "runs.csv", rows, [*HEADER, "dataset", "comment"])
    (tmp_path / "map.yaml").write_text(MAPPING)
    args = ["import", str(data), "--experiment", "imported", "--mapping", str(tmp_path / "map.yaml")]
    assert run_cli([*args, "--strict"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "file: runs.csv has unknown columns comment, dataset (--strict refuses them)" in err
    assert imported_runs() == []
    assert run_cli(args) == 0
    out = capsys.readouterr()
    warnings = [line for line in out.err.splitlines() if "unknown columns" in line]  # MLflow logs there too
    assert warnings == ["warning: ignored unknown columns comment, dataset (--strict refuses them)"]
    assert "imported 3, skipped 0 already present, refused 0" in out.out
    assert len(imported_runs()) == 3


PER_DEVICE_HEADER = [*HEADER[:5], "per_device_train_batch_size", *HEADER[6:]]
PER_DEVICE_MAPPING = MAPPING.replace(
    "minutes: time_s", "minutes: time_s, per_device_train_batch_size: per_device_batch_size"
)


def test_a_per_device_batch_table_is_converted_by_strategy(tracking_uri: str, tmp_path: Path) -> None:
    """HF Trainer's per_device_train_batch_size: x N under ddp/fsdp, as is under single and tp."""
    rows = [
        [12, 768, 12, 3072, 128, 8, 1000, "single", 1, "cuda", "fp16", "nvml", 0.5, 30],
        [12, 768, 12, 3072, 128, 8, 1000, "ddp", 4, "cuda", "fp16", "nvml", 0.7, 10],
        [12, 768, 12, 3072, 128, 8, 1000, "fsdp", 2, "cuda", "fp16", "nvml", 0.7, 20],
        [12, 768, 12, 3072, 128, 8, 1000, "tp", 4, "cuda", "fp16", "nvml", 0.9, 9],
    ]
    data = write_csv(tmp_path / "runs.csv", rows, PER_DEVICE_HEADER)
    (tmp_path / "map.yaml").write_text(PER_DEVICE_MAPPING)
    assert run_cli(["import", str(data), "--experiment", "imported", "--mapping", str(tmp_path / "map.yaml")]) == 0
    batches = {r.data.params["strategy"]: r.data.params["batch_size"] for r in imported_runs()}
    assert batches == {"single": "8", "ddp": "32", "fsdp": "16", "tp": "8"}
    # The fit measures the weak-scaling runs against the single run at their per-device batch.
    frame = load_train_runs(TrackingClient(), ["imported"]).frame
    assert sorted(frame["batch_size"]) == [8, 8, 16, 32]


def test_per_device_and_global_batch_that_disagree_are_refused_naming_both(
    tracking_uri: str, tmp_path: Path, capsys
) -> None:
    header = [*HEADER[:6], "per_device_batch_size", *HEADER[6:]]
    rows = [
        [*ROWS[1][:6], 8, *ROWS[1][6:]],  # ddp x4, batch 32, 8 per device: they agree
        [*ROWS[1][:6], 16, *ROWS[1][6:]],  # line 3: 16 per device x 4 = 64, not 32
    ]
    data = write_csv(tmp_path / "runs.csv", rows, header)
    (tmp_path / "map.yaml").write_text(MAPPING)
    assert run_cli(["import", str(data), "--experiment", "imported", "--mapping", str(tmp_path / "map.yaml")]) == 1
    err = capsys.readouterr().err
    assert (
        "refused line 3: per_device_batch_size: 16 per device under ddp on 4 devices is a batch_size of 64, "
        "but the row gives batch_size 32" in err
    )
    (run,) = imported_runs()
    assert run.data.params["batch_size"] == "32"


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        ("units: {energy: calories}", "mapping.units.energy: must be one of J, Wh, kWh, got 'calories'"),
        ("units: {time: days}", "mapping.units.time: must be one of s, min, h, got 'days'"),
        ("colums: {a: b}", "mapping.colums: unknown key"),
        ("constants: {strategy: ddp}", "mapping.constants.strategy: the file already has this column"),
    ],
)
def test_a_bad_mapping_is_one_line_and_exit_2(
    tracking_uri: str, tmp_path: Path, capsys, mapping: str, message: str
) -> None:
    data = write_csv(tmp_path / "runs.csv", ROWS)
    (tmp_path / "map.yaml").write_text(mapping)
    assert run_cli(["import", str(data), "--experiment", "imported", "--mapping", str(tmp_path / "map.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert imported_runs() == []


def test_parquet_in_schema_names(tracking_uri: str, tmp_path: Path) -> None:
    frame = pd.DataFrame(
        [
            dict(
                zip(["num_layers", *HEADER[1:12]], row[:12]),
                energy_j=row[12] * 3.6e6,
                time_s=row[13] * 60.0,
                hardware=GPU,
            )
            for row in ROWS
        ]
    )
    frame.to_parquet(tmp_path / "runs.parquet")
    assert run_cli(["import", str(tmp_path / "runs.parquet"), "--experiment", "imported"]) == 0
    runs = imported_runs()
    assert sorted(r.data.tags[TAG_IMPORT_ROW] for r in runs) == ["row 1", "row 2", "row 3"]


def test_imported_runs_enter_the_fit_even_where_this_launcher_would_refuse(tracking_uri: str, tmp_path: Path) -> None:
    data = write_csv(tmp_path / "runs.csv", ROWS)
    (tmp_path / "map.yaml").write_text(MAPPING)
    assert run_cli(["import", str(data), "--experiment", "imported", "--mapping", str(tmp_path / "map.yaml")]) == 0
    runs = load_train_runs(TrackingClient(), ["imported"])
    assert runs.dropped == {}
    assert sorted(runs.frame["strategy"]) == ["ddp", "single", "tp"]  # tp with 12 heads on 8 devices kept


def codecarbon_csv(tmp_path: Path) -> Path:
    """A real emissions.csv: CodeCarbon's offline tracker around two small CPU jobs."""
    codecarbon = pytest.importorskip("codecarbon")
    for project in ("bert-L2-single", "bert-L4-single"):
        tracker = codecarbon.OfflineEmissionsTracker(
            country_iso_code="FRA",
            output_dir=str(tmp_path),
            project_name=project,
            log_level="error",
            measure_power_secs=1,
            save_to_file=True,
        )
        tracker.start()
        sum(i * i for i in range(300_000))
        tracker.stop()
    return tmp_path / "emissions.csv"


CC_MAPPING = """
constants: {seq_len: 128, batch_size: 16, num_steps: 50, strategy: single, num_devices: 1, precision: fp32}
rows:
  key: project_name
  values:
    bert-L2-single: {num_layers: 2, hidden_size: 128, num_heads: 2, ffn_size: 512}
    bert-L4-single: {num_layers: 4, hidden_size: 256, num_heads: 4, ffn_size: 1024}
"""


def codecarbon_import_args(table: Path, mapping: Path) -> list[str]:
    """The CLI arguments that import ``table`` as CodeCarbon's CSV into ``imported`` through ``mapping``."""
    return ["import", str(table), "--format", "codecarbon", "--experiment", "imported", "--mapping", str(mapping)]


def test_codecarbon_emissions_csv_from_a_real_tracker(tracking_uri: str, tmp_path: Path) -> None:
    emissions = codecarbon_csv(tmp_path)
    (tmp_path / "cc.yaml").write_text(CC_MAPPING)
    args = codecarbon_import_args(emissions, tmp_path / "cc.yaml")
    assert run_cli(args) == 0
    source = pd.read_csv(emissions)
    runs = {int(r.data.params["num_layers"]): r for r in imported_runs()}
    assert set(runs) == {2, 4}
    for (_, row), layers in zip(source.iterrows(), (2, 4)):
        run = runs[layers]
        assert run.data.tags[TAG_SOURCE] == "import:codecarbon"
        assert run.data.tags[TAG_ENERGY_SOURCE] == "estimate"  # a CPU job: RAPL or TDP, the file does not say
        assert run.data.tags[TAG_HARDWARE] == row["cpu_model"]
        assert run.data.params["device"] == "cpu"
        assert run.data.metrics[M_ENERGY_J] == pytest.approx(row["energy_consumed"] * 3.6e6)
        assert run.data.metrics[M_TIME_S] == pytest.approx(row["duration"])
    assert run_cli(args) == 0  # twice: nothing more
    assert len(imported_runs()) == 2


def test_codecarbon_gpu_row_uses_the_gpu_energy_and_keeps_the_node(tracking_uri: str, tmp_path: Path) -> None:
    emissions = codecarbon_csv(tmp_path)
    frame = pd.read_csv(emissions).head(1)
    # The same file as CodeCarbon writes it on a 4-GPU node (its gpu_* columns filled in).
    # 400 W per GPU over the job's duration, in kWh: inside the physical bounds the fit applies.
    gpu_kwh = 4 * 400.0 * float(frame["duration"].iloc[0]) / 3.6e6
    frame["gpu_count"], frame["gpu_model"], frame["gpu_energy"] = 4, f"4 x {GPU}", gpu_kwh
    frame["energy_consumed"] = frame["cpu_energy"] + frame["ram_energy"] + frame["gpu_energy"]
    frame.to_csv(tmp_path / "gpu.csv", index=False)
    (tmp_path / "cc.yaml").write_text(
        "constants: {num_layers: 12, hidden_size: 768, num_heads: 12, ffn_size: 3072, seq_len: 128,"
        " batch_size: 32, num_steps: 100, strategy: ddp, precision: bf16}\n"
    )
    args = codecarbon_import_args(tmp_path / "gpu.csv", tmp_path / "cc.yaml")
    assert run_cli(args) == 0
    (run,) = imported_runs()
    assert run.data.tags[TAG_HARDWARE] == GPU
    assert run.data.tags[TAG_ENERGY_SOURCE] == "nvml"
    assert run.data.params["num_devices"] == "4" and run.data.params["device"] == "cuda"
    assert run.data.metrics[M_ENERGY_J] == pytest.approx(gpu_kwh * 3.6e6)
    assert run.data.metrics["energy_node_j"] == pytest.approx(float(frame["energy_consumed"].iloc[0]) * 3.6e6)
    assert math.isclose(
        run.data.metrics["energy_node_j"],
        run.data.metrics["energy_j"] + run.data.metrics["energy_cpu_j"] + run.data.metrics["energy_dram_j"],
        rel_tol=1e-9,
    )


def test_codecarbon_row_without_a_mapping_entry_is_refused_by_name(tracking_uri: str, tmp_path: Path, capsys) -> None:
    emissions = codecarbon_csv(tmp_path)
    (tmp_path / "cc.yaml").write_text(CC_MAPPING.replace("bert-L4-single:", "other:"))
    args = codecarbon_import_args(emissions, tmp_path / "cc.yaml")
    assert run_cli(args) == 1
    assert "line 3: mapping.rows.values: no entry for project_name='bert-L4-single'" in capsys.readouterr().err


def _semicolons(path: Path) -> Path:
    path.write_text(";".join(HEADER) + "\n" + ";".join(map(str, ROWS[0])) + "\n")
    return path


def _fifo(tmp_path: Path) -> Path:
    os.mkfifo(tmp_path / "runs.csv")
    return tmp_path / "runs.csv"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda tmp: write_csv(tmp / "runs.csv", [[*row, GPU, 9] for row in ROWS], [*HEADER, "hardware", "layers"]),
            "runs.csv names the column 'layers' twice (columns 1 and 16): name each column once",
        ),
        (
            lambda tmp: _semicolons(tmp / "runs.csv"),
            "it looks separated by ';', but import reads comma-separated CSV",
        ),
        (lambda tmp: Path("/dev/zero"), "/dev/zero is a character device, not a regular file"),
        (_fifo, "runs.csv is a FIFO, not a regular file"),
    ],
    ids=["duplicated-column", "semicolons", "dev-zero", "fifo"],
)
def test_a_file_that_cannot_be_read_as_a_table_is_one_line_and_exit_2(
    tracking_uri: str, tmp_path: Path, capsys, make, message: str
) -> None:
    data = make(tmp_path)
    (tmp_path / "map.yaml").write_text(MAPPING)
    code = run_cli(["import", str(data), "--experiment", "imported", "--mapping", str(tmp_path / "map.yaml")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("Error: file: ") and message in err
    assert imported_runs() == []


def test_units_scale_every_energy_column_of_a_table(tracking_uri: str, tmp_path: Path) -> None:
    data = write_csv(tmp_path / "runs.csv", [[*ROWS[0], 1.5]], [*HEADER, "node_kwh"])
    (tmp_path / "map.yaml").write_text(MAPPING.replace("minutes: time_s", "minutes: time_s, node_kwh: energy_node_j"))
    assert run_cli(["import", str(data), "--experiment", "imported", "--mapping", str(tmp_path / "map.yaml")]) == 0
    (run,) = imported_runs()
    assert run.data.metrics["energy_node_j"] == pytest.approx(1.5 * 3.6e6)  # kWh, like energy_j
    assert run.data.metrics[M_ENERGY_J] == pytest.approx(0.5 * 3.6e6)
