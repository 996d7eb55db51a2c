"""Write tests/module_seconds.json, the seconds each test module took, from a pytest JUnit report.

The suite's conftest hands the modules to the xdist workers longest first (``--dist loadfile``),
so that the long ones, most of them waiting on a server or a cluster, start while the other worker
still has short modules to fill their waits, and the run never ends on one long module with a core
idle. After tests move or grow, run the suite with a report and rewrite the table::

    .venv/bin/python -m pytest tests -n 2 --dist loadfile --junitxml=/tmp/junit.xml
    .venv/bin/python scripts/module_seconds.py /tmp/junit.xml

A module's seconds are the sum of its tests' (setup, call and teardown, JUnit's ``time``), so a
module-scoped fixture is counted once, in the test that set it up.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from pathlib import Path

TABLE = Path(__file__).resolve().parents[1] / "tests" / "module_seconds.json"


def module_seconds(junit_xml: Path) -> dict[str, float]:
    """Seconds per test module path (``tests/e2e/test_fit.py``), longest first, from a JUnit report."""
    seconds: defaultdict[str, float] = defaultdict(float)
    for case in ElementTree.parse(junit_xml).iter("testcase"):
        # classname is the module's dotted path, then any test class: tests.e2e.test_fit[.Class]
        parts = case.get("classname", "").split(".")
        while parts and not parts[-1].startswith("test_"):
            parts.pop()
        if parts:
            seconds["/".join(parts) + ".py"] += float(case.get("time", "0"))
    return {module: round(s, 1) for module, s in sorted(seconds.items(), key=lambda item: -item[1])}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python scripts/module_seconds.py JUNIT_XML", file=sys.stderr)
        return 2
    table = module_seconds(Path(argv[0]))
    if not table:
        print(f"{argv[0]}: no test cases in this JUnit report", file=sys.stderr)
        return 1
    TABLE.write_text(json.dumps(table, indent=1) + "\n")
    print(f"{TABLE}: {len(table)} modules, {sum(table.values()):.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
