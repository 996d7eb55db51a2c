"""The MLflow UI as a user sees it, in Debian's headless Chromium driven by Playwright.

A real sweep (three tiny configurations and one impossible grid point) and a fit (on
synthetic runs drawn from a known law, in their own experiment) fill an SQLite store;
``mlflow server`` serves it on loopback. Each test opens a page and checks one thing a
user looks for. Screenshots land in the test's temp dir; with ``ROOFLINE_SCREENSHOT_DIR``
set (``make screenshots``) the two the README shows are written there too.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cli_in_process import run_cli
from support.module_store import module_store

pytest.importorskip("playwright.sync_api", reason="the browser test needs playwright (pip install -e '.[test]')")
if not Path("/usr/bin/chromium").exists():
    pytest.skip("the browser test needs Debian's chromium (apt-get install -y chromium)", allow_module_level=True)

from mlflow import MlflowClient
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from mlflow_roofline.core.schema import M_ENERGY_J, TAG_NOTE, TAG_PARENT_RUN_ID, TAG_RUN_TYPE
from mlflow_roofline.testing.mlflow_ui import chromium_page, experiment_url, mlflow_ui, run_url

pytestmark = pytest.mark.slow

SPEC = """experiment: roofline-bert
device: cpu
meter: estimate
num_steps: 2
warmup_steps: 1
num_heads: 2
ffn_ratio: 2
seq_len: 8
batch_size: 4
grid:
  - {num_layers: [1, 2], hidden_size: 16}
  - {num_layers: 1, hidden_size: 16, strategy: ddp, num_devices: 2}
  - {num_layers: 1, hidden_size: 16, num_heads: 3}
"""
README_SHOTS = {"sweep_runs": "ui-sweep-runs.png", "fit_run": "ui-fit-run.png"}
RUN_NAME = 'col-id="attributes.`Run Name`"'
ENERGY = 'col-id="metrics.`energy_j`"'


class Store:
    """The filled store: its URI and directory, the sweep's parent and children, the fit run, and the UI
    links the sweep and the fit printed."""

    def __init__(self, uri: str, root: Path, printed: dict[str, str]) -> None:
        client = MlflowClient(uri)
        self.uri, self.root, self.printed = uri, root, printed
        self.sweep_experiment = client.get_experiment_by_name("roofline-bert")
        (self.parent,) = client.search_runs([self.sweep_experiment.experiment_id], f"tags.`{TAG_RUN_TYPE}` = 'sweep'")
        self.children = client.search_runs(
            [self.sweep_experiment.experiment_id], f"tags.`{TAG_PARENT_RUN_ID}` = '{self.parent.info.run_id}'"
        )
        fit_experiment = client.get_experiment_by_name("roofline-synthetic")
        (self.fit,) = client.search_runs([fit_experiment.experiment_id], f"tags.`{TAG_RUN_TYPE}` = 'fit'")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, store_template: Path) -> Store:
    """The store after the sweep (the CLI in this process: its ranks fork from this worker's warm server) and a fit."""
    from mlflow_roofline.fit.pipeline import run_fit
    from mlflow_roofline.testing.synthetic import log_synthetic_runs
    from mlflow_roofline.tracking.client import TrackingClient
    from mlflow_roofline.tracking.experiments import get_or_create_experiment

    root = tmp_path_factory.mktemp("ui_store")
    (root / "tiny.yaml").write_text(SPEC)
    with module_store(root, store_template) as (uri, patch):
        for name in [k for k in os.environ if k.startswith("MLFLOW_") and k != "MLFLOW_TRACKING_URI"]:
            patch.delenv(name)
        sweep = run_cli("sweep", "tiny.yaml", "--no-progress")
        assert sweep.returncode == 0, sweep.stdout + sweep.stderr
        synthetic = get_or_create_experiment(TrackingClient(), "roofline-synthetic")
        log_synthetic_runs(MlflowClient(), synthetic, 10, seed=5)
        fit_lines: list[str] = []
        run_fit(["roofline-synthetic"], model_name="", alias="", register=False, echo=fit_lines.append)
    printed = {"sweep": printed_url(sweep.stdout.splitlines()), "fit": printed_url(fit_lines)}
    return Store(uri, root, printed)


def printed_url(lines: list[str]) -> str:
    """The Model training link a command printed (its last line)."""
    (url,) = re.findall(r"http://\S+", lines[-1])
    return url


def at(ui: str, printed: str) -> str:
    """A printed link on the test's server (the command printed `mlflow ui`'s default address)."""
    return ui + printed[printed.index("/#/") :]


@pytest.fixture(scope="module")
def ui(store: Store) -> Iterator[str]:
    with mlflow_ui(store.uri, cwd=store.root) as base:
        yield base


@pytest.fixture(scope="module")
def page(ui: str) -> Iterator[Any]:
    with chromium_page() as page:
        yield page


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


def screenshot(page: Any, shots: Path, name: str) -> None:
    """Save a screenshot of what the test saw; the README's two, to ROOFLINE_SCREENSHOT_DIR, once the page settled.

    Only the README's images wait for the page to stop loading: MLflow's UI polls the server,
    so "networkidle" rarely comes and each wait ran to its 15 s limit (a minute per suite run
    for images in a temp dir that nobody reads unless a test is being debugged).
    """
    target = os.environ.get("ROOFLINE_SCREENSHOT_DIR") if name in README_SHOTS else None
    if target:
        with contextlib.suppress(PlaywrightTimeout):
            page.wait_for_load_state("networkidle", timeout=15_000)
        page.wait_for_timeout(1000)  # let the table settle after the last response
    path = shots / f"{name}.png"
    page.screenshot(path=str(path))
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, Path(target) / README_SHOTS[name])


def close_assistant(page: Any) -> None:
    """Close MLflow's Assistant side panel if it is open (it narrows the table)."""
    close = page.locator('[data-component-id="mlflow.assistant.chat_panel.close"]')
    if close.count() and close.first.is_visible():
        close.first.click()


def open_sweep(page: Any, ui: str, store: Store) -> None:
    page.goto(experiment_url(ui, store.sweep_experiment.experiment_id))
    page.locator(f'[role="gridcell"][{RUN_NAME}]', has_text=store.parent.info.run_name).first.wait_for()
    close_assistant(page)


def expand_parent(page: Any, store: Store) -> None:
    """Show the sweep's children (the UI remembers an expanded parent, so only click when collapsed)."""
    child = page.locator(f'[role="gridcell"][{RUN_NAME}]', has_text=store.children[0].info.run_name).first
    if not child.count():
        cell = page.locator(f'[role="gridcell"][{RUN_NAME}]', has_text=store.parent.info.run_name).first
        cell.locator("button").first.click()
    child.wait_for()


def names_in_row_order(page: Any) -> list[str]:
    """Run names of the table's rows, top to bottom (ag-grid's DOM order is not the visual one)."""
    cells = page.locator(f'[role="gridcell"][{RUN_NAME}]')
    indexed = cells.evaluate_all(
        "cells => cells.map(c => [Number(c.closest('[role=row]').getAttribute('row-index')), c.innerText])"
    )
    return [text.strip().splitlines()[-1] for _, text in sorted(indexed)]


def test_the_experiment_opens_in_the_model_training_view(page: Any, ui: str, store: Store) -> None:
    assert store.sweep_experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    open_sweep(page, ui, store)
    sidebar = page.locator("aside, nav").first.inner_text() if page.locator("aside, nav").count() else ""
    body = page.inner_text("body")
    # the Model training sidebar: runs and models, none of the GenAI pages
    assert page.get_by_role("link", name="Models").first.is_visible()
    assert "Sessions" not in body and "Judges" not in body and "Sessions" not in sidebar


def test_the_sweep_parent_expands_to_its_children(page: Any, ui: str, store: Store) -> None:
    open_sweep(page, ui, store)
    assert names_in_row_order(page) == [store.parent.info.run_name]  # collapsed: the parent alone
    expand_parent(page, store)
    shown = names_in_row_order(page)
    assert shown[0] == store.parent.info.run_name
    assert sorted(shown[1:]) == sorted(c.info.run_name for c in store.children) and len(store.children) == 3


def test_the_childrens_energy_column_can_be_shown_and_sorted(page: Any, ui: str, store: Store, shots: Path) -> None:
    open_sweep(page, ui, store)
    expand_parent(page, store)
    page.get_by_role("button", name="Columns", exact=True).click()
    page.get_by_placeholder("Search columns").fill(M_ENERGY_J)
    node = (
        page.get_by_test_id("column-selector-tree")
        .locator(".du-bois-light-tree-treenode")
        .filter(has_text=re.compile(rf"^{M_ENERGY_J}$"))
    )
    node.first.locator(".du-bois-light-tree-checkbox").click()
    page.keyboard.press("Escape")
    header = page.locator(f'[role="columnheader"][{ENERGY}]').first
    header.scroll_into_view_if_needed()
    header.click()
    page.wait_for_url(re.compile(r"orderByKey=metrics\.%60energy_j%60"))
    ascending = urllib.parse.parse_qs(page.url.split("?", 1)[1])["orderByAsc"] == ["true"]
    energy = {c.info.run_name: c.data.metrics[M_ENERGY_J] for c in store.children}
    expected = sorted(energy, key=energy.get, reverse=not ascending)
    shown: list[str] = []
    for _ in range(60):  # the table reloads the runs in the new order from the server
        shown = [name for name in names_in_row_order(page) if name in energy]
        if shown == expected:
            break
        page.wait_for_timeout(500)
    assert shown == expected
    cells = page.locator(f'[role="gridcell"][{ENERGY}]').all_inner_texts()
    assert sum(bool(text.strip()) and text.strip() != "-" for text in cells) == 3  # the children's energies
    screenshot(page, shots, "sweep_runs")


def test_the_sweep_description_tells_the_story(page: Any, ui: str, store: Store, shots: Path) -> None:
    page.goto(run_url(ui, store.sweep_experiment.experiment_id, store.parent.info.run_id))
    page.get_by_text("Energy and time of the finished runs").first.wait_for()
    close_assistant(page)
    table = page.locator("table", has_text="energy (J), total").first
    assert "single" in table.inner_text() and "ddp" in table.inner_text()
    assert page.get_by_text("Skipped as impossible").first.is_visible()
    screenshot(page, shots, "sweep_run")


def test_the_fit_description_renders_the_formula(page: Any, ui: str, store: Store, shots: Path) -> None:
    page.goto(run_url(ui, store.fit.info.experiment_id, store.fit.info.run_id))
    formula = page.locator("p", has_text="= κ").first  # E = κ·…, or E<sub>form</sub> = κ·… of an average's first
    formula.wait_for()
    close_assistant(page)
    show_more = page.get_by_text("Show more")
    if show_more.count():
        show_more.first.click()
    note = store.fit.data.tags[TAG_NOTE]
    stored = next(line for line in note.splitlines() if line.startswith("**E") and "= κ" in line)
    exponents = re.findall(r"<sup>([^<]+)</sup>", stored)
    rendered = formula.locator("sup").all_inner_texts()
    assert rendered == exponents and len(exponents) >= 3  # real superscripts, the fitted exponents
    assert "<sup>" not in formula.inner_text()
    assert page.locator("table", has_text="adjusted R², efficiency-aware law").first.is_visible()
    screenshot(page, shots, "fit_run")


def test_a_plot_artifact_renders_as_an_image(page: Any, ui: str, store: Store, shots: Path) -> None:
    page.goto(run_url(ui, store.fit.info.experiment_id, store.fit.info.run_id))
    page.get_by_text("Artifacts", exact=True).first.click()  # the run's Artifacts tab, then the file
    close_assistant(page)
    tree_entry = page.get_by_text("measured_vs_predicted.png", exact=True).first
    if not tree_entry.is_visible():
        page.get_by_text("plots", exact=True).first.click()
    tree_entry.click()
    image = page.locator('img[src^="blob:"]').first  # the artifact, fetched and shown as an image
    image.wait_for()
    page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=image.element_handle())
    assert image.evaluate("img => img.naturalWidth") > 300
    screenshot(page, shots, "fit_artifact")


def test_the_printed_link_opens_the_named_runs_in_the_model_training_view(page: Any, ui: str, store: Store) -> None:
    assert store.printed["sweep"].endswith(
        f"/#/experiments/{store.sweep_experiment.experiment_id}/runs?workflowType=machine_learning"
    )
    page.goto(at(ui, store.printed["sweep"]))
    page.locator(f'[role="gridcell"][{RUN_NAME}]', has_text="sweep-tiny").first.wait_for()
    close_assistant(page)
    assert page.get_by_role("link", name="Models").first.is_visible()  # the Model training sidebar
    expand_parent(page, store)
    shown = names_in_row_order(page)  # in the order an earlier sort left (the UI keeps it)
    assert sorted(shown) == sorted(["sweep-tiny", *(c.info.run_name for c in store.children)])
    children = [name for name in shown if name != "sweep-tiny"]
    assert all(re.match(r"^\w+-x\d-L\d-d\d+-h\d-ff\d+-S\d+-B\d+$", name) for name in children)  # placement first


def test_the_fit_run_shows_its_dataset_and_a_description_naming_every_plot(
    page: Any, ui: str, store: Store, shots: Path
) -> None:
    page.goto(at(ui, store.printed["fit"]))
    cell = page.locator(f'[role="gridcell"][{RUN_NAME}]', has_text="fit-roofline-synthetic").first
    cell.wait_for()
    close_assistant(page)
    cell.locator("a").first.click()  # the run's page, as a user gets there
    page.get_by_text("Energy law for").first.wait_for()
    close_assistant(page)
    page.get_by_text("train-runs on ").first.wait_for()  # the Datasets panel: the train runs it learned from
    show_more = page.get_by_text("Show more")
    if show_more.count():
        show_more.first.click()
    plots = [a.path for a in MlflowClient(store.uri).list_artifacts(store.fit.info.run_id, "plots")]
    body = page.inner_text("body")
    assert len(plots) >= 4 and all(path in body for path in plots)
    screenshot(page, shots, "fit_dataset")


def test_a_train_runs_page_leads_with_its_paragraph_and_its_energy(page: Any, ui: str, store: Store) -> None:
    child = store.children[0]
    page.goto(run_url(ui, store.sweep_experiment.experiment_id, child.info.run_id))
    page.get_by_text(f"{child.data.params['strategy']} x{child.data.params['num_devices']}: a ").first.wait_for()
    close_assistant(page)
    page.get_by_text("Model metrics (").first.wait_for()
    lines = [line.strip() for line in page.inner_text("body").splitlines() if line.strip()]
    first = lines.index(next(line for line in lines if line.startswith("Model metrics (")))
    assert lines[first + 1] == M_ENERGY_J and lines[first + 3] == "time_s"  # name, value, name, value
