"""The hardware table shipped as package data, and a user's table extending it."""

from __future__ import annotations

import csv
from importlib import resources
from pathlib import Path

import pytest

from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.gpu_datasheets import COLUMNS, ENV_HARDWARE_TABLE, load_hardware_table, shipped_specs

NVIDIA_HOSTS = {"images.nvidia.com", "www.nvidia.com", "resources.nvidia.com", "nvdam.widen.net"}

# (NVML name as torch.cuda.get_device_name reports it, row, dense FP16 tensor TFLOP/s, memory GB/s, board W)
KNOWN = [
    ("Tesla V100-SXM2-32GB", "V100 SXM2", 125, 900, 300),
    ("Tesla V100-PCIE-16GB", "V100 PCIe", 112, 900, 250),
    ("NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB", 312, 2039, 400),
    ("NVIDIA A100-SXM4-40GB", "A100 SXM4 40GB", 312, 1555, 400),
    ("NVIDIA A100-PCIE-40GB", "A100 PCIe 40GB", 312, 1555, 250),
    ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB", 312, 1935, 300),
    ("NVIDIA A10", "A10", 125, 600, 150),
    ("NVIDIA A30", "A30", 165, 933, 165),
    ("NVIDIA A40", "A40", 149.7, 696, 300),
    ("NVIDIA L4", "L4", 121, 300, 72),
    ("NVIDIA L40S", "L40S", 362.05, 864, 350),
    ("NVIDIA H100 80GB HBM3", "H100 SXM", 989.4, 3350, 700),
    ("NVIDIA H100 PCIe", "H100 PCIe", 756.5, 2000, 350),
    ("NVIDIA H200", "H200 SXM", 989.4, 4800, 700),
    ("NVIDIA GeForce RTX 2080 Ti", "GeForce RTX 2080 Ti", 53.8, 616, 250),
    ("NVIDIA GeForce RTX 3090", "GeForce RTX 3090", 71, 936, 350),
    ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090", 165.2, 1008, 450),
    ("NVIDIA RTX A6000", "RTX A6000", 154.8, 768, 300),
    ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada", 364.2, 960, 300),
]


@pytest.mark.parametrize("nvml, row, tflops, gb_s, watts", KNOWN)
def test_every_listed_gpu_is_found_by_its_nvml_name_with_its_datasheet_figures(
    nvml: str, row: str, tflops: float, gb_s: float, watts: float
) -> None:
    spec = load_hardware_table(env={}).lookup(nvml)
    assert spec is not None and spec.name == row
    assert spec.fp16_tensor_flops == pytest.approx(tflops * 1e12)
    assert spec.mem_bandwidth_bytes_per_s == pytest.approx(gb_s * 1e9)
    assert spec.board_power_w == watts
    host = spec.source.split("/")[2]
    assert spec.source.startswith("https://") and host in NVIDIA_HOSTS  # NVIDIA's own datasheets
    assert spec.peak_flops("fp32") == spec.fp32_flops < spec.peak_flops("bf16") == spec.fp16_tensor_flops


def test_each_nvml_name_matches_one_row_only_and_unknown_names_none() -> None:
    specs = shipped_specs()
    assert len(specs) == len(KNOWN)
    for nvml, *_ in KNOWN:
        assert sum(s.matches(nvml) for s in specs) == 1, nvml
    table = load_hardware_table(env={})
    for other in ("Tesla V100S-PCIE-32GB", "NVIDIA A100", "NVIDIA L40", "cpu:Intel(R) Xeon(R)", "NVIDIA H200 NVL"):
        assert table.lookup(other) is None, other
    assert table.lookup("a100 sxm4 80gb").name == "A100 SXM4 80GB"  # a row's own name, any case


def test_shipped_file_has_every_column_filled() -> None:
    text = resources.files("mlflow_roofline").joinpath("data", "hardware.csv").read_text()
    for row in csv.DictReader(text.splitlines()):
        assert all(row[c].strip() for c in COLUMNS), row


def _write(path: Path, rows: list[str]) -> Path:
    path.write_text("\n".join([",".join(COLUMNS)] + rows) + "\n")
    return path


def test_a_user_table_extends_and_overrides_from_the_env_or_an_argument(tmp_path: Path) -> None:
    user = _write(
        tmp_path / "mine.csv",
        [
            "Lab GPU,LAB-GPU-\\d+,100e12,10e12,1e12,200,https://lab.example/datasheet",
            "H200 capped,NVIDIA H200,989.4e12,67e12,4.8e12,500,https://lab.example/power-cap",
        ],
    )
    by_env = load_hardware_table(env={ENV_HARDWARE_TABLE: str(user)})
    assert by_env.lookup("LAB-GPU-7").mem_bandwidth_bytes_per_s == 1e12
    assert by_env.lookup("NVIDIA H200").board_power_w == 500  # the user's row wins
    by_arg = load_hardware_table(user, env={})
    assert by_arg.names()[:2] == ["Lab GPU", "H200 capped"] and "A100 SXM4 80GB" in by_arg.names()
    assert load_hardware_table(env={}).lookup("LAB-GPU-7") is None


@pytest.mark.parametrize(
    "row, field, words",
    [
        ("X,X,0,1,1,1,https://s", "mine.csv:2.fp16_tensor_flops", ["positive"]),
        ("X,X,1,abc,1,1,https://s", "mine.csv:2.fp32_flops", ["positive"]),
        ("X,X,1,1,1,1,", "mine.csv:2.source", ["source"]),
        ("X,(unclosed,1,1,1,1,https://s", "mine.csv:2.pattern", ["regular expression"]),
    ],
)
def test_a_bad_user_row_names_its_line_and_column(tmp_path: Path, row: str, field: str, words: list[str]) -> None:
    path = _write(tmp_path / "mine.csv", [row])
    with pytest.raises(ConfigError) as info:
        load_hardware_table(path, env={})
    assert info.value.field.endswith(field)
    assert all(w in info.value.rule for w in words)


def test_a_missing_column_or_file_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "short.csv"
    bad.write_text("name,pattern\nX,X\n")
    with pytest.raises(ConfigError, match="lacks the column"):
        load_hardware_table(bad, env={})
    with pytest.raises(ConfigError, match="cannot read"):
        load_hardware_table(env={ENV_HARDWARE_TABLE: str(tmp_path / "absent.csv")})
