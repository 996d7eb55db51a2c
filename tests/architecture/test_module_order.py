"""The order the suite's modules are handed to the xdist workers: tests/module_seconds.json and its writer."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _writer():
    spec = importlib.util.spec_from_file_location("module_seconds", REPO / "scripts" / "module_seconds.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_table_names_only_test_modules_that_exist_longest_first() -> None:
    table = json.loads((REPO / "tests" / "module_seconds.json").read_text())
    assert table, "tests/module_seconds.json is empty"
    missing = [module for module in table if not (REPO / module).is_file()]
    assert not missing, f"tests/module_seconds.json names modules that are gone: {missing}; rewrite it"
    assert list(table.values()) == sorted(table.values(), reverse=True)


def test_the_writer_sums_each_modules_tests_classes_included(tmp_path: Path) -> None:
    report = tmp_path / "junit.xml"
    report.write_text(
        '<?xml version="1.0"?><testsuites><testsuite name="pytest">'
        '<testcase classname="tests.e2e.test_fit" name="test_a" time="2.5"/>'
        '<testcase classname="tests.e2e.test_fit.TestGroup" name="test_b" time="1.0"/>'
        '<testcase classname="tests.testing.test_weak_fleet" name="test_c[1]" time="4.0"/>'
        '<testcase classname="tests.core.test_rules" name="test_d" time="0.25"/>'
        "</testsuite></testsuites>"
    )
    assert _writer().module_seconds(report) == {
        "tests/testing/test_weak_fleet.py": 4.0,
        "tests/e2e/test_fit.py": 3.5,
        "tests/core/test_rules.py": 0.2,
    }
