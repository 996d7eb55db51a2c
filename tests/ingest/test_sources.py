"""What a file offers: its columns after the mapping's renames, the mapping's constants and per-row fields."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.ingest.mapping import parse_mapping
from mlflow_roofline.ingest.sources import CODECARBON_FIELDS, read_rows, read_table


def test_a_table_offers_its_renamed_columns_constants_and_row_fields(tmp_path: Path) -> None:
    path = tmp_path / "runs.csv"
    path.write_text("run,layers,kwh,notes\nbase,12,0.5,first\nlarge,24,,\n")
    mapping = parse_mapping(
        {
            "columns": {"layers": "num_layers", "kwh": "energy_j"},
            "units": {"energy": "kWh"},
            "constants": {"hardware": "GPU"},
            "rows": {"key": "run", "values": {"base": {"hidden_size": 768}, "large": {"seq_len": 512}}},
        }
    )
    table = read_table(path, "table", mapping)
    # the row key is the mapping's own column: neither offered as a field nor kept in a row
    assert table.offered == {"num_layers", "energy_j", "notes", "hardware", "hidden_size", "seq_len"}
    assert [row.where for row in table.rows] == ["line 2", "line 3"]
    assert table.rows[0].fields == {
        "hardware": "GPU",
        "hidden_size": 768,
        "num_layers": "12",
        "energy_j": 1.8e6,
        "notes": "first",
    }
    assert "energy_j" not in table.rows[1].fields  # an empty cell: missing in that row only
    assert read_rows(path, "table", mapping) == table.rows


def test_an_empty_codecarbon_file_offers_what_the_format_derives(tmp_path: Path) -> None:
    path = tmp_path / "emissions.csv"
    path.write_text("duration,energy_consumed,cpu_energy,gpu_energy,ram_energy,cpu_model\n")
    table = read_table(path, "codecarbon", parse_mapping({"constants": {"num_layers": 2}}))
    assert table.rows == [] and table.offered == {*CODECARBON_FIELDS, "num_layers"}


def test_the_energy_unit_applies_to_every_energy_field(tmp_path: Path) -> None:
    path = tmp_path / "runs.csv"
    path.write_text("kwh,cpu_kwh,dram_kwh,node_kwh,hours\n1,0.5,0.25,2,0.5\n")
    mapping = parse_mapping(
        {
            "columns": {
                "kwh": "energy_j",
                "cpu_kwh": "energy_cpu_j",
                "dram_kwh": "energy_dram_j",
                "node_kwh": "energy_node_j",
                "hours": "time_s",
            },
            "units": {"energy": "kWh", "time": "h"},
        }
    )
    (row,) = read_rows(path, "table", mapping)
    assert row.fields == {
        "energy_j": 3.6e6,
        "energy_cpu_j": 1.8e6,
        "energy_dram_j": 0.9e6,
        "energy_node_j": 7.2e6,
        "time_s": 1800.0,
    }


def test_two_columns_mapped_to_one_field_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_mapping({"columns": {"gpu_kwh": "energy_j", "node_kwh": "energy_j"}})
    assert caught.value.field == "mapping.columns.node_kwh"
    assert "'gpu_kwh' and 'node_kwh' are both mapped to 'energy_j'" in caught.value.rule
    path = tmp_path / "runs.csv"
    path.write_text("energy_j,kwh\n5,1\n")  # a column renamed onto one the file already has
    with pytest.raises(ConfigError, match=r"file columns 'energy_j' and 'kwh' would both be 'energy_j'") as renamed:
        read_table(path, "table", parse_mapping({"columns": {"kwh": "energy_j"}}))
    assert renamed.value.field == "mapping.columns.kwh"


def test_rows_entries_naming_a_file_column_are_refused_like_constants(tmp_path: Path) -> None:
    path = tmp_path / "runs.csv"
    path.write_text("run,num_layers\nbase,12\n")
    mapping = parse_mapping({"rows": {"key": "run", "values": {"base": {"num_layers": 24, "hidden_size": 768}}}})
    with pytest.raises(ConfigError, match="the file already has this column") as caught:
        read_table(path, "table", mapping)
    assert caught.value.field == "mapping.rows.values.base.num_layers"


CODECARBON_HEADER = (
    "project_name,duration,energy_consumed,cpu_energy,gpu_energy,ram_energy,gpu_count,gpu_model,cpu_model\n"
)


@pytest.mark.parametrize("gpu_energy", ["-0.01", "nan", "inf", "lots", "0.5"])
def test_a_codecarbon_gpu_row_with_an_impossible_gpu_energy_is_refused_not_a_cpu_job(
    tmp_path: Path, gpu_energy: str
) -> None:
    path = tmp_path / "emissions.csv"
    # energy_consumed 0.2 kWh for the node: 0.5 kWh of GPU energy alone cannot be right
    path.write_text(CODECARBON_HEADER + f"p,600,0.2,0.05,{gpu_energy},0.01,4,4 x GPU,Xeon\n")
    (row,) = read_rows(path, "codecarbon", parse_mapping({}))
    assert row.problem is not None and row.problem[0] == "gpu_energy"


def test_a_codecarbon_gpu_row_within_the_node_is_a_gpu_job(tmp_path: Path) -> None:
    path = tmp_path / "emissions.csv"
    path.write_text(CODECARBON_HEADER + "p,600,0.2,0.05,0.14,0.01,4,4 x GPU,Xeon\n")
    (row,) = read_rows(path, "codecarbon", parse_mapping({}))
    assert row.problem is None and row.fields["hardware"] == "GPU" and row.fields["energy_source"] == "nvml"


@pytest.mark.parametrize(
    ("mapping", "field"),
    [
        ({"constants": {"energy_j": 100.0}}, "mapping.constants.energy_j"),
        ({"constants": {"time_s": 60}}, "mapping.constants.time_s"),
        (
            {"rows": {"key": "project_name", "values": {"p": {"energy_node_j": 5}}}},
            "mapping.rows.values.p.energy_node_j",
        ),
    ],
)
def test_a_codecarbon_mapping_never_overwrites_what_the_file_measures(
    tmp_path: Path, mapping: dict[str, object], field: str
) -> None:
    path = tmp_path / "emissions.csv"
    path.write_text(CODECARBON_HEADER + "p,600,0.2,0.05,0.14,0.01,4,4 x GPU,Xeon\n")
    with pytest.raises(ConfigError, match="CodeCarbon's file measures this field") as caught:
        read_table(path, "codecarbon", parse_mapping(mapping))
    assert caught.value.field == field
