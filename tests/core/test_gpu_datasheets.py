"""The hardware table shipped as package data, and a user's table extending it."""

from __future__ import annotations

import csv
from importlib import resources
from pathlib import Path

import pytest

from mlflow_roofline.core import gpu_datasheets
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.gpu_datasheets import (
    COLUMNS,
    DEVICE_RANGES,
    ENV_ALLOW_SIMULATED,
    ENV_HARDWARE_TABLE,
    OPTIONAL_COLUMNS,
    PRECISION_COLUMNS,
    HardwareTable,
    glob_match_steps,
    glob_matches,
    load_hardware_table,
    shipped_specs,
)

NVIDIA_HOSTS = {"images.nvidia.com", "www.nvidia.com", "resources.nvidia.com", "nvdam.widen.net"}
VENDOR_HOSTS = NVIDIA_HOSTS | {"www.amd.com", "www.intel.com", "aws.amazon.com"}

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


# Rows added with issue 21: (name as NVML / amdsmi / torch reports it, row, dense FP16/BF16 TFLOP/s, GB/s,
# board W, memory GB, interconnect GB/s)
ADDED = [
    ("Tesla V100-SXM2-16GB", "V100 SXM2 16GB", 125, 900, 300, 16, 300),
    ("Tesla V100-PCIE-32GB", "V100 PCIe 32GB", 112, 900, 250, 32, 32),
    ("Tesla V100S-PCIE-32GB", "V100S PCIe", 130, 1134, 250, 32, 32),
    ("Tesla P100-SXM2-16GB", "P100 SXM2", 21.2, 732, 300, 16, 160),
    ("Tesla P100-PCIE-16GB", "P100 PCIe 16GB", 18.7, 732, 250, 16, 32),
    ("Tesla P100-PCIE-12GB", "P100 PCIe 12GB", 18.7, 549, 250, 12, 32),
    ("Tesla T4", "T4", 65, 320, 70, 16, 32),
    ("NVIDIA A2", "A2", 18, 200, 60, 16, 32),
    ("NVIDIA A10G", "A10G", 70, 600, 300, 24, 64),
    ("NVIDIA A16", "A16", 17.9, 200, 62.5, 16, 64),
    ("NVIDIA L40", "L40", 181.05, 864, 300, 48, 64),
    ("NVIDIA H100 NVL", "H100 NVL", 835.5, 3900, 400, 94, 600),
    ("NVIDIA H200 NVL", "H200 NVL", 835.5, 4800, 600, 141, 900),
    ("NVIDIA H20", "H20", 148, 4000, 400, 96, 900),
    ("NVIDIA B100", "B100", 1750, 8000, 700, 192, 1800),
    ("NVIDIA B200", "B200", 2250, 8000, 1000, 180, 1800),
    ("NVIDIA GB200", "GB200", 2500, 8000, 1200, 186, 1800),
    ("NVIDIA GeForce RTX 3080", "GeForce RTX 3080", 59.5, 760, 320, 10, 64),
    ("NVIDIA GeForce RTX 4080", "GeForce RTX 4080", 97.5, 716.8, 320, 16, 64),
    ("NVIDIA GeForce RTX 5090", "GeForce RTX 5090", 209.5, 1792, 575, 32, 128),
    ("NVIDIA RTX A4000", "RTX A4000", 76.7, 448, 140, 16, 64),
    ("NVIDIA RTX A5000", "RTX A5000", 111.1, 768, 230, 24, 112.5),
    ("Quadro RTX 6000", "Quadro RTX 6000", 130.5, 672, 295, 24, 100),
    ("Quadro RTX 8000", "Quadro RTX 8000", 130.5, 672, 295, 48, 100),
    ("NVIDIA TITAN RTX", "TITAN RTX", 130, 672, 280, 24, 100),
    ("AMD Instinct MI210", "MI210", 181, 1600, 300, 64, 300),
    ("AMD Instinct MI250", "MI250", 362.1, 3200, 500, 128, 600),
    ("AMD Instinct MI250X", "MI250X", 383, 3200, 560, 128, 800),
    ("AMD Instinct MI300X", "MI300X", 1307.4, 5300, 750, 192, 896),
    ("GAUDI2", "Gaudi 2", 432, 2450, 600, 96, 600),
    ("GAUDI3", "Gaudi 3", 1835, 3700, 900, 128, 1200),
]


@pytest.mark.parametrize("nvml, row, tflops, gb_s, watts, memory_gb, link_gb_s", ADDED)
def test_every_added_device_is_found_by_its_reported_name_with_its_datasheet_figures(
    nvml: str, row: str, tflops: float, gb_s: float, watts: float, memory_gb: float, link_gb_s: float
) -> None:
    spec = load_hardware_table(env={}).lookup(nvml)
    assert spec is not None and spec.name == row
    assert spec.fp16_tensor_flops == pytest.approx(tflops * 1e12)
    assert spec.mem_bandwidth_bytes_per_s == pytest.approx(gb_s * 1e9)
    assert spec.board_power_w == watts
    assert spec.memory_bytes == memory_gb * 2**30  # the datasheet's GB of device memory are GiB
    assert spec.interconnect and spec.interconnect_bytes_per_s == pytest.approx(link_gb_s * 1e9)
    assert spec.fp32_flops < spec.fp16_tensor_flops
    assert spec.source.split("/")[2] in VENDOR_HOSTS if spec.source.startswith("https://") else row == "H20"


# The names the issue asks for, as the drivers report them (NVML, amdsmi / ROCm's torch, Habana's torch).
REPORTED = {
    "Tesla T4": "T4",
    "NVIDIA T4": "T4",
    "NVIDIA A100-SXM4-80GB": "A100 SXM4 80GB",
    "nvidia a100-sxm4-80gb": "A100 SXM4 80GB",
    "NVIDIA H100 80GB HBM3": "H100 SXM",
    "NVIDIA H100 SXM5 80GB": "H100 SXM",
    "NVIDIA H200": "H200 SXM",
    "NVIDIA GeForce RTX 4090": "GeForce RTX 4090",
    "GeForce RTX 2080 Ti": "GeForce RTX 2080 Ti",
    "AMD Instinct MI250X": "MI250X",
    "AMD Instinct MI250X/MI250": "MI250X",
    "AMD Instinct MI300X VF": "MI300X",
    "HL-225H": "Gaudi 2",
    "HL-325L": "Gaudi 3",
    "V100 SXM2": "V100 SXM2",  # a row's own name, as before the 16 GB row was added
}


def test_reported_names_find_their_row_and_near_misses_none() -> None:
    table = load_hardware_table(env={})
    for reported, row in REPORTED.items():
        spec = table.lookup(reported)
        assert spec is not None and spec.name == row, reported
    for other in ("NVIDIA A100", "NVIDIA GeForce RTX 4090 D", "NVIDIA GeForce RTX 3080 Ti", "NVIDIA L40S-2"):
        assert table.lookup(other) is None, other
    assert table.lookup("NVIDIA L40").name == "L40" and table.lookup("NVIDIA L40S").name == "L40S"
    assert table.lookup("AMD Instinct MI250").name == "MI250" and table.lookup("AMD Instinct MI300A") is None


def test_globs_match_any_case_and_never_take_exponential_time() -> None:
    assert glob_matches("HL-225*", "hl-225h") and glob_matches("a?c", "ABC") and glob_matches("*", "")
    assert not glob_matches("HL-225*", "HL-325L") and not glob_matches("a?c", "ac")
    assert glob_matches("*a*a*a*a*b", "a" * 30 + "b") and not glob_matches("*a*a*a*a*a*a*b", "a" * 5000)


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        ("*a*a*a*a*a*a*a*a*b", "a" * 30 + "!"),  # a 31-character request against nested stars
        ("*?*?*?*?*?*?*?*?*?x", "y" * 31),
        ("NVIDIA*A100*SXM*80GB*", "nvidia " * 4 + "a100 "),
    ],
)
def test_a_glob_match_takes_steps_bounded_by_pattern_times_text(pattern: str, text: str) -> None:
    """Counted, not timed: a backtracking matcher takes exponentially many steps on these."""
    matched, steps = glob_match_steps(pattern, text)
    assert not matched
    assert steps <= (len(pattern) + 1) * (len(text) + 1)


def test_every_shipped_row_fills_every_column_within_a_real_device_s_range() -> None:
    modes = set(PRECISION_COLUMNS.values())  # a device may lack a precision's mode: empty, else in range
    for spec in shipped_specs():
        for column, (low, high) in DEVICE_RANGES.items():
            value = getattr(spec, column)
            assert (value is None and column in modes) or low <= value <= high, (spec.name, column)
        assert spec.interconnect and spec.note and spec.source
        # each figure is off by 10^3 or more from both ends of its range, so a slip of 10^3 is refused
        for column, (low, high) in DEVICE_RANGES.items():
            value = getattr(spec, column)
            assert value is None or (value * 1e3 > high and value / 1e3 < low), (spec.name, column)
        # the roofline covariates of a real device: power per peak FLOP/s and the ridge point
        ridge = spec.fp16_tensor_flops / spec.mem_bandwidth_bytes_per_s
        assert 10 < ridge < 1000 and 1e-14 < spec.board_power_w / spec.fp16_tensor_flops < 1e-10, spec.name


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
    assert spec.peak_flops("fp32") == spec.fp32_flops < spec.peak_flops("fp16") == spec.fp16_tensor_flops


def test_each_nvml_name_matches_one_row_only_and_unknown_names_none() -> None:
    specs = shipped_specs()
    assert len(specs) == len(KNOWN) + len(ADDED)
    for nvml in [k[0] for k in KNOWN] + [a[0] for a in ADDED] + list(REPORTED):
        assert sum(s.matches(nvml) for s in specs) == 1, nvml
    table = load_hardware_table(env={})
    for other in ("NVIDIA A100", "cpu:Intel(R) Xeon(R)", "NVIDIA H100", "AMD Instinct MI300A"):
        assert table.lookup(other) is None, other
    assert table.lookup("a100 sxm4 80gb").name == "A100 SXM4 80GB"  # a row's own name, any case


def test_shipped_file_has_every_column_filled() -> None:
    """Every column but the precisions a device may lack (a V100 has no tf32, bf16 or fp8 mode)."""
    precisions = set(PRECISION_COLUMNS.values())
    text = resources.files("mlflow_roofline").joinpath("data", "hardware.csv").read_text()
    for row in csv.DictReader(text.splitlines()):
        assert all(row[c].strip() for c in COLUMNS + OPTIONAL_COLUMNS if c not in precisions), row


@pytest.mark.parametrize(
    ("name", "peaks"),
    [
        ("V100 SXM2", {"fp32": 15.7e12, "fp16": 125e12}),
        ("A100 SXM4 80GB", {"fp32": 19.5e12, "tf32": 156e12, "bf16": 312e12, "fp16": 312e12}),
        ("H100 SXM", {"tf32": 494.7e12, "bf16": 989.4e12, "fp8": 1978.8e12}),
        ("MI250X", {"bf16": 383e12}),
    ],
)
def test_each_precision_reads_its_own_peak_and_a_missing_mode_is_refused_by_name(
    name: str, peaks: dict[str, float]
) -> None:
    spec = next(s for s in shipped_specs() if s.name == name)
    for precision, peak in peaks.items():
        assert spec.peak_flops(precision) == pytest.approx(peak, rel=1e-3)
    for missing in set(PRECISION_COLUMNS) - {p for p in PRECISION_COLUMNS if spec.supports(p)}:
        with pytest.raises(ConfigError, match=rf"^precision: {name} has no {missing} peak in the hardware table"):
            spec.peak_flops(missing)
    assert spec.covariates("fp32")["log_peak"] < spec.covariates("fp16")["log_peak"]


def _write(path: Path, rows: list[str]) -> Path:
    path.write_text("\n".join([",".join(COLUMNS)] + rows) + "\n")
    return path


def test_a_user_table_extends_and_overrides_from_the_env_or_an_argument(tmp_path: Path) -> None:
    user = _write(
        tmp_path / "mine.csv",
        [
            "Lab GPU,LAB-GPU-*,100e12,10e12,1e12,200,https://lab.example/datasheet",
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
        ("X,X,0,1e12,1e12,300,https://s", "mine.csv:2.fp16_tensor_flops", ["positive"]),
        ("X,X,1e14,abc,1e12,300,https://s", "mine.csv:2.fp32_flops", ["positive"]),
        ("X,X,1e14,1e13,1e12,300,", "mine.csv:2.source", ["source"]),
        ("X,(unclosed,1e14,1e13,1e12,300,https://s", "mine.csv:2.pattern", ["regular expression"]),
        ("X,LAB-\\d+,1e14,1e13,1e12,300,https://s", "mine.csv:2.pattern", ["regular expression", "glob"]),
        ("X,A||B,1e14,1e13,1e12,300,https://s", "mine.csv:2.pattern", ["empty alternative"]),
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


GOOD = {
    "fp16_tensor_flops": "312e12",
    "fp32_flops": "19.5e12",
    "mem_bandwidth_bytes_per_s": "2039e9",
    "board_power_w": "400",
}
OPTIONAL_GOOD = {"memory_bytes": "85899345920", "interconnect_bytes_per_s": "600e9"}


def _table(path: Path, rows: list[dict[str, str]]) -> Path:
    columns = [*COLUMNS, *OPTIONAL_COLUMNS]
    path.write_text("\n".join([",".join(columns)] + [",".join(row.get(c, "") for c in columns) for row in rows]) + "\n")
    return path


def _row(name: str, pattern: str, **numbers: str) -> dict[str, str]:
    return {"name": name, "pattern": pattern, "source": "https://s", **GOOD, **OPTIONAL_GOOD, **numbers}


@pytest.mark.parametrize("column", [*GOOD, *OPTIONAL_GOOD])
@pytest.mark.parametrize("slip", [1e3, 1e6, 1e9, 1e-3, 1e-6, 1e-9])
def test_a_unit_slip_is_refused_naming_the_row_and_the_column(tmp_path: Path, column: str, slip: float) -> None:
    good = _table(tmp_path / "good.csv", [_row("Lab GPU", "LAB-GPU")])
    assert load_hardware_table(good, env={}).lookup("lab-gpu").memory_bytes == 80 * 2**30
    value = float({**GOOD, **OPTIONAL_GOOD}[column]) * slip
    path = _table(tmp_path / "mine.csv", [_row("Lab A", "LAB-A"), _row("Lab GPU", "LAB-GPU", **{column: f"{value:g}"})])
    with pytest.raises(ConfigError) as info:
        load_hardware_table(path, env={})
    assert info.value.field.endswith(f"mine.csv:3.{column}")
    assert "outside what a real device can have" in info.value.rule and "unit slip" in info.value.rule


def test_a_simulated_device_is_read_only_when_allowed_and_then_checked_for_positive_figures(tmp_path: Path) -> None:
    row = {**_row("Sim", "Sim"), "source": "simulated:tests", "mem_bandwidth_bytes_per_s": "2.66e9"}
    allowed = {ENV_ALLOW_SIMULATED: "1"}
    assert load_hardware_table(_table(tmp_path / "sim.csv", [row]), env=allowed).lookup("Sim") is not None
    with pytest.raises(ConfigError, match="positive"):
        load_hardware_table(_table(tmp_path / "bad.csv", [{**row, "board_power_w": "-1"}]), env=allowed)
    # elsewhere the prefix cannot wave a unit slip through: the row is refused, naming the switch
    with pytest.raises(ConfigError, match=ENV_ALLOW_SIMULATED) as info:
        load_hardware_table(_table(tmp_path / "sim2.csv", [row]), env={})
    assert info.value.field.endswith("sim2.csv:2.source")


@pytest.mark.parametrize(
    "second, column",
    [
        (_row("lab gpu", "OTHER"), "name"),  # the same name, any case
        (_row("Lab GPU 2", "LAB-GPU-7|Other"), "pattern"),  # the same pattern
        (_row("Lab GPU 2", "Lab GPU"), "pattern"),  # a pattern naming the first row
        (_row("LAB-GPU-7", "Other"), "name"),  # a name the first row's pattern matches
        (_row("Lab GPU 2", "LAB-GPU-?"), "pattern"),  # a glob matching the first row's literal pattern
    ],
)
def test_a_name_or_pattern_naming_two_rows_is_refused(tmp_path: Path, second: dict[str, str], column: str) -> None:
    path = _table(tmp_path / "mine.csv", [_row("Lab GPU", "LAB-GPU-7"), second])
    with pytest.raises(ConfigError) as info:
        load_hardware_table(path, env={})
    assert info.value.field.endswith(f"mine.csv:3.{column}") and "line 2" in info.value.rule


def test_a_user_row_may_override_a_shipped_one_with_the_same_name(tmp_path: Path) -> None:
    path = _table(tmp_path / "mine.csv", [_row("T4 capped", "Tesla T4", board_power_w="60")])
    assert load_hardware_table(path, env={}).lookup("Tesla T4").board_power_w == 60


def test_remembered_lookups_answer_as_a_scan_of_the_rows_and_stop_growing_at_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert load_hardware_table() is load_hardware_table()  # one shipped table per process: its lookups are kept
    monkeypatch.setattr(gpu_datasheets, "LOOKUPS_KEPT", 3)
    table = HardwareTable(shipped_specs())
    names = [nvml for nvml, *_ in KNOWN[:4]] + ["no such GPU", "nvidia a100-sxm4-80gb"]
    for _ in range(2):  # the second pass answers the first three from memory, the rest by scanning again
        for name in names:
            assert table.lookup(name) == next((spec for spec in table.specs if spec.matches(name)), None)
    assert list(table._found) == names[:3]
