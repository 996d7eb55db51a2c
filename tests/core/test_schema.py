"""Every logged MLflow name is defined once, in mlflow_roofline/core/schema.py, and source text
says what the code does without pointing at the tracker.

The checks read the package's source with ``ast`` (and ``tokenize`` for comments); each one
fails with the list of offending ``file:line`` places.
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from mlflow_roofline.core import schema
from mlflow_roofline.core.schema import HARDWARE_COLUMN
from mlflow_roofline.fit.hardware_fit import fit_hardware
from mlflow_roofline.serve.emissions import EMISSION_COLUMNS
from mlflow_roofline.serve.footprint_columns import FOOTPRINT_COLUMNS
from mlflow_roofline.serve.placement_search import PARETO_OUTPUT_COLUMNS, RECOMMEND_OUTPUT_COLUMNS
from mlflow_roofline.serve.predict import PREDICT_OUTPUT_COLUMNS
from mlflow_roofline.serve.validate import INPUT_COLUMNS, SPEEDUP_COLUMN
from mlflow_roofline.testing.roofline_generator import generate_roofline_runs

PACKAGE = Path(schema.__file__).resolve().parents[1]
SCHEMA = Path(schema.__file__).resolve()
NAME_PREFIXES = ("M_", "P_", "TAG_")
"""Schema constants that hold one logged name: metrics, params beyond PARAM_NAMES, tags."""

#: Calls that log one name: callee -> position of the name when called as ``mlflow.<callee>``
#: (fluent) or on a client (``client.<callee>(run_id, name, ...)``) or as an entity.
ONE_NAME_CALLS = {"log_metric": (0, 1), "log_param": (0, 1), "set_tag": (0, 1), "delete_tag": (0, 1)}
ENTITY_CALLS = {"Metric", "Param", "RunTag"}
MANY_NAME_CALLS = {"log_metrics", "log_params", "set_tags"}


def logged_names() -> dict[str, str]:
    """Logged name -> the schema constant that defines it."""
    names = {
        value: key for key, value in vars(schema).items() if key.startswith(NAME_PREFIXES) and isinstance(value, str)
    }
    assert len(names) >= 30, "the schema's name constants were not found"
    return names


def package_sources() -> Iterator[tuple[Path, str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        yield path, text, ast.parse(text, filename=str(path))


def where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(PACKAGE.parent)}:{getattr(node, 'lineno', 0)}"


def docstring_nodes(tree: ast.Module) -> set[int]:
    """ids of the string constants that are docstrings (module, class, function)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


SAME_WORD_ELSEWHERE = {("law/roofline_efficiency.py", "alpha_eta"), ("fit/forms/time_law.py", "time_per_work")}
"""(module, word) where a logged name's word names something else that is never logged: a
coefficient of the roofline law, the name of a time-law form."""


def spelled_names(names: dict[str, str]) -> list[str]:
    """String literals equal to a logged name, outside the schema (docstrings aside)."""
    found = []
    for path, _, tree in package_sources():
        if path == SCHEMA:
            continue
        docs = docstring_nodes(tree)
        module = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and node.value in names and id(node) not in docs):
                continue
            if (module, node.value) not in SAME_WORD_ELSEWHERE:
                found.append(f"{where(path, node)} {node.value!r} (use schema.{names[node.value]})")
    return found


def name_prefixes() -> dict[str, str]:
    """Prefix of a family of logged names (``cv_mape_`` of ``cv_mape_<form>``) -> its schema constant."""
    return {v: k for k, v in vars(schema).items() if k.startswith("M_") and k.endswith("_PREFIX") and v}


def formatted_names(prefixes: dict[str, str]) -> list[str]:
    """f-strings outside the schema that build a logged name from its literal prefix (``f"cv_mape_{form}"``)."""
    found = []
    for path, _, tree in package_sources():
        if path == SCHEMA:
            continue
        for node in ast.walk(tree):
            if not (isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant)):
                continue
            head = str(node.values[0].value)
            for prefix, constant in prefixes.items():
                if head.startswith(prefix):
                    found.append(f"{where(path, node)} f{head!r}... (use schema.{constant} and its name helper)")
                    break
    return found


def name_constants_outside_schema() -> list[str]:
    """Module-level ``TAG_*`` / ``M_*`` / ``P_*`` string constants defined outside the schema."""
    found = []
    for path, _, tree in package_sources():
        if path == SCHEMA:
            continue
        for node in tree.body:
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign):
                targets, value = [node.target], node.value
            else:
                continue
            for target in targets:
                if (
                    isinstance(target, ast.Name)
                    and target.id.startswith(NAME_PREFIXES)
                    and isinstance(value, ast.Constant)
                    and isinstance(value.value, str)
                ):
                    found.append(f"{where(path, node)} {target.id} = {value.value!r}")
    return found


def _callee(call: ast.Call) -> tuple[str, bool]:
    """The called name and whether it is the fluent API (``mlflow.<name>``)."""
    func = call.func
    if isinstance(func, ast.Attribute):
        fluent = isinstance(func.value, ast.Name) and func.value.id == "mlflow"
        return func.attr, fluent
    if isinstance(func, ast.Name):
        return func.id, False
    return "", False


def _literal_keys(node: ast.AST) -> list[ast.Constant]:
    if isinstance(node, ast.Dict):
        return [k for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    return []


def literal_names_at_logging_calls() -> list[str]:
    """Names given as string literals where a param, metric or tag is logged."""
    found = []
    for path, _, tree in package_sources():
        for call in ast.walk(tree):
            if not isinstance(call, ast.Call):
                continue
            name, fluent = _callee(call)
            literals: list[ast.expr] = []
            if name in ONE_NAME_CALLS:
                position = ONE_NAME_CALLS[name][0 if fluent else 1]
                if len(call.args) > position:
                    literals = [call.args[position]]
            elif name in ENTITY_CALLS and call.args:
                literals = [call.args[0]]
            elif name in MANY_NAME_CALLS:
                literals = [key for arg in call.args for key in _literal_keys(arg)]
                literals += [key for kw in call.keywords for key in _literal_keys(kw.value)]
            for node in literals:
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    found.append(f"{where(path, node)} {name}({node.value!r})")
    return found


def test_logged_names_are_spelled_only_in_the_schema() -> None:
    offenders = spelled_names(logged_names())
    assert not offenders, "logged names spelled outside core/schema.py:\n" + "\n".join(offenders)


def test_logged_names_are_not_built_from_literal_prefixes() -> None:
    assert len(name_prefixes()) >= 10, "the schema's name prefixes were not found"
    offenders = formatted_names(name_prefixes())
    assert not offenders, "names built from a literal prefix outside core/schema.py:\n" + "\n".join(offenders)


def is_schema_name(name: str) -> bool:
    """Whether ``name`` is a schema constant's value or one of its families (prefix + form/strategy)."""
    return name in logged_names() or any(name.startswith(prefix) for prefix in name_prefixes())


def test_every_metric_a_fit_logs_is_a_schema_name() -> None:
    """The metrics of a real fit (every form, speedup law, extrapolation, noise floor) are schema names."""
    warnings.simplefilter("ignore")
    frame = generate_roofline_runs(16, repeats=2, steps=(20, 40), seed=3)
    hardware = str(frame["hardware"].iloc[0])
    fit = fit_hardware(frame, hardware)
    fit_metric_names = set(fit.metrics())
    assert {schema.M_CV_MAPE, schema.M_ALPHA_ETA, schema.M_REPEAT_SPREAD} <= fit_metric_names
    assert schema.form_metric(schema.M_CV_MAPE_FORM_PREFIX, fit.energy.chosen) in fit_metric_names
    unknown = sorted(n for n in fit_metric_names if not is_schema_name(n))
    assert not unknown, "fit metrics not defined in core/schema.py: " + ", ".join(unknown)


def test_docs_schema_lists_every_logged_name() -> None:
    """docs/schema.md names each metric, tag and param constant and each family (``cv_mape_<form>``)."""
    text = (PACKAGE.parent / "docs" / "schema.md").read_text()
    names = [v for k, v in vars(schema).items() if k.startswith(NAME_PREFIXES) and isinstance(v, str)]
    missing = [name for name in names if f"`{name}" not in text]
    assert not missing, "docs/schema.md does not list: " + ", ".join(missing)


def test_docs_schema_lists_every_served_column() -> None:
    """Every input and output column of the served model, in each mode, is named in docs/schema.md."""
    text = (PACKAGE.parent / "docs" / "schema.md").read_text()
    columns = {*INPUT_COLUMNS, SPEEDUP_COLUMN, HARDWARE_COLUMN, *PREDICT_OUTPUT_COLUMNS, *EMISSION_COLUMNS}
    columns |= set(FOOTPRINT_COLUMNS)
    columns |= {*RECOMMEND_OUTPUT_COLUMNS, *PARETO_OUTPUT_COLUMNS}
    missing = sorted(c for c in columns if f"`{c}`" not in text)
    assert not missing, "docs/schema.md does not list the served columns: " + ", ".join(missing)


def test_logged_name_constants_are_defined_only_in_the_schema() -> None:
    offenders = name_constants_outside_schema()
    assert not offenders, "move these name constants to core/schema.py:\n" + "\n".join(offenders)


def test_logging_calls_take_their_names_from_the_schema() -> None:
    offenders = literal_names_at_logging_calls()
    assert not offenders, "literal names logged (define them in core/schema.py):\n" + "\n".join(offenders)


ISSUE_CITATION = re.compile(r"\bissues?\s*#?\s*\d+\b|(?<![\w&/#])#\d+\b|\bGH-\d+\b", re.IGNORECASE)


def comments_and_docstrings(text: str, tree: ast.Module) -> Iterator[tuple[int, str]]:
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string.lstrip("#")
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc is not None:
                yield node.body[0].lineno, doc


def issue_citations() -> list[str]:
    found = []
    for path, text, tree in package_sources():
        for line, words in comments_and_docstrings(text, tree):
            for match in ISSUE_CITATION.finditer(words):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{line} {match.group(0)!r}")
    return found


def test_no_docstring_or_comment_cites_an_issue() -> None:
    offenders = issue_citations()
    assert not offenders, "docstrings and comments say what the code does, not which issue asked:\n" + "\n".join(
        offenders
    )


@pytest.mark.parametrize(
    ("text", "cites"),
    [
        ("# fixed for issue 9", True),
        ("# see Issues #12 and 13", True),
        ("# (#12)", True),
        ("# GH-4", True),
        ("# colour #1f77b4, 12 threads, step #", False),
        ("# issues with the store", False),
    ],
)
def test_the_citation_pattern(text: str, cites: bool) -> None:
    assert bool(ISSUE_CITATION.search(text.lstrip("#"))) is cites


def test_the_scanners_find_what_they_look_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scans run over a package of one module that breaks every rule once."""
    package = tmp_path / "pkg"
    (package / "core").mkdir(parents=True)
    (package / "core" / "schema.py").write_text('TAG_OK = "roofline.ok"\n')
    (package / "bad.py").write_text(
        '"""A module."""  # issue 9\n'
        "import mlflow\n"
        'TAG_NEW = "roofline.new"\n'
        "def f(client):\n"
        '    """Fixes #12."""\n'
        '    client.set_tag("run", "roofline.ok", "v")\n'
        '    mlflow.log_metrics({"cv_mape": 1.0})\n'
    )
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", package)
    monkeypatch.setattr(sys.modules[__name__], "SCHEMA", package / "core" / "schema.py")
    assert spelled_names({"roofline.ok": "TAG_OK"}) == ["pkg/bad.py:6 'roofline.ok' (use schema.TAG_OK)"]
    assert name_constants_outside_schema() == ["pkg/bad.py:3 TAG_NEW = 'roofline.new'"]
    assert literal_names_at_logging_calls() == [
        "pkg/bad.py:6 set_tag('roofline.ok')",
        "pkg/bad.py:7 log_metrics('cv_mape')",
    ]
    assert issue_citations() == ["pkg/bad.py:1 'issue 9'", "pkg/bad.py:5 '#12'"]
