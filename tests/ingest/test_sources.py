"""What a file offers: its columns after the mapping's renames, the mapping's constants and per-row fields."""

from __future__ import annotations

from pathlib import Path

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
