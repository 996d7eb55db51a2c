"""The strict YAML reader of specs and mappings: YAML 1.2 scalars, no duplicate keys, bounded aliases."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.strict_yaml import MAX_ALIAS_EXPANSION, load_yaml
from mlflow_roofline.ingest.mapping import load_mapping
from mlflow_roofline.sweep.spec import load_spec

SPEC = (
    "device: cpu\nseq_len: 8\nbatch_size: 4\nnum_heads: 2\nffn_size: 32\n"
    + "grid: {num_layers: [1], hidden_size: [16]}\n"
)


def billion_laughs(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1:30", "1:30"),  # YAML 1.1: the sexagesimal 90
        ("1e-300", 1e-300),  # YAML 1.1: a string (no dot)
        ("1e3", 1000.0),
        ("yes", "yes"),  # YAML 1.1: True
        ("no", "no"),
        ("NO", "NO"),  # Norway, not False
        ("on", "on"),
        ("off", "off"),
        ("010", 10),  # YAML 1.1: the octal 8
        ("0o17", 15),
        ("0x1F", 31),
        ("1_000", "1_000"),  # YAML 1.1: 1000
        ("2024-01-01", "2024-01-01"),  # YAML 1.1: a date
        ("true", True),
        ("False", False),
        ("~", None),
        ("-2.5", -2.5),
        (".inf", float("inf")),
    ],
)
def test_plain_scalars_are_read_as_yaml_1_2(text: str, value: object) -> None:
    read = load_yaml(f"key: {text}\n")
    assert read == {"key": value} and type(read["key"]) is type(value)  # type: ignore[index]


@pytest.mark.parametrize(
    "text", ["a: 1\nb: 2\na: 3\n", "{a: 1, a: 2}\n", "grid:\n  num_layers: [1]\n  num_layers: [2]\n", "1: x\n1: y\n"]
)
def test_a_key_written_twice_is_refused_naming_it_and_its_lines(text: str) -> None:
    with pytest.raises(ConfigError, match="written twice"):
        load_yaml(text)


def test_a_billion_laughs_document_is_refused_in_milliseconds() -> None:
    started = time.perf_counter()
    with pytest.raises(ConfigError, match="anchors and aliases expand it") as info:
        load_yaml(billion_laughs(), what="spec")
    assert info.value.field == "spec"
    assert time.perf_counter() - started < 0.5


def test_a_recursive_alias_is_refused() -> None:
    with pytest.raises(ConfigError, match="recursive"):
        load_yaml("a: &a [1, *a]\n")


def test_a_few_aliases_within_the_bound_still_read() -> None:
    assert load_yaml("base: &b {x: 1}\nother: *b\n") == {"base": {"x": 1}, "other": {"x": 1}}
    width = MAX_ALIAS_EXPANSION // 2
    read = load_yaml("a: &a [1]\nb: [" + ", ".join(["*a"] * width) + "]\n")
    assert len(read["b"]) == width  # type: ignore[index]


def test_a_spec_file_is_read_strictly(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SPEC + "timeout_s: 1:30\n")
    with pytest.raises(ConfigError, match="timeout_s.*'1:30'"):
        load_spec(str(path))
    path.write_text(SPEC + "timeout_s: 1e3\n")
    assert load_spec(str(path)).timeout_s == 1000.0
    path.write_text(SPEC + "repeats: yes\n")
    with pytest.raises(ConfigError, match="repeats.*'yes'"):
        load_spec(str(path))
    path.write_text(SPEC + "region: NO\n")
    assert load_spec(str(path)).carbon["region"] == "NO"
    path.write_text(SPEC + "seq_len: 16\n")
    with pytest.raises(ConfigError, match="seq_len: is written twice"):
        load_spec(str(path))
    path.write_text(billion_laughs() + SPEC)
    with pytest.raises(ConfigError, match="^spec: its anchors"):
        load_spec(str(path))


def test_a_mapping_file_is_read_strictly(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("columns:\n  joules: energy_j\n  joules: time_s\n")
    with pytest.raises(ConfigError, match=r"mapping\.joules: is written twice"):
        load_mapping(path)
    path.write_text("constants:\n  precision: bf16\n  hardware: NO\n  num_steps: 1:30\n")
    assert load_mapping(path).constants == {"precision": "bf16", "hardware": "NO", "num_steps": "1:30"}
    path.write_text(billion_laughs() + "columns: {}\n")
    with pytest.raises(ConfigError, match="^mapping: its anchors"):
        load_mapping(path)
