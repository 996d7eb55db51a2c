"""The sweep run's Markdown description: its content for a given state, and on a real sweep."""

from __future__ import annotations

import re
import statistics

import pytest
from support.sweeps import unsplittable_tp_config

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.schema import TAG_NOTE
from mlflow_roofline.sweep.parent_description import Row, sweep_markdown
from mlflow_roofline.sweep.plan import Plan, Skipped
from mlflow_roofline.sweep.spec import parse_spec
from mlflow_roofline.sweep.status import DONE, FAILED, NEW, Outcome, Status
from mlflow_roofline.tracking.client import TrackingClient

SPEC = parse_spec(
    {
        "device": "cpu",
        "meter": "estimate",
        "grid": {
            "num_layers": [1, 2],
            "hidden_size": 16,
            "num_heads": 2,
            "ffn_size": 32,
            "seq_len": 8,
            "batch_size": 4,
        },
    },
    name="tiny",
)


def config(layers: int, strategy: str = "single", devices: int = 1) -> TrainConfig:
    return TrainConfig(
        num_layers=layers,
        hidden_size=16,
        num_heads=2,
        ffn_size=32,
        seq_len=8,
        batch_size=4,
        num_steps=2,
        warmup_steps=1,
        strategy=strategy,
        num_devices=devices,
    )


def row(markdown: str, first_cells: str) -> list[str]:
    (line,) = [ln for ln in markdown.splitlines() if ln.startswith(f"| {first_cells} |")]
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_description_counts_tabulates_and_explains_each_state() -> None:
    a, b, c, d, e = config(1), config(2), config(3), config(1, "ddp", 2), config(2, "ddp", 2)
    skipped = Skipped("L1-d16-h3-tp2", (("num_heads", 3),), "num_heads", "must be divisible by num_devices (2)")
    plan = Plan(configs=(a, b, c, d, e), skipped=(skipped,), hardware="cpu-x", device="cpu")
    entries = [
        Row(a, Status(DONE, "run-a"), "skip", None),
        Row(b, Status(NEW), "run", Outcome("run-b", "FINISHED", "", 3.0, 0)),
        Row(c, Status(FAILED, "run-c0", "out of memory"), "skip", None),
        Row(d, Status(NEW), "run", Outcome("run-d", "FAILED", "boom\nlong", 2.0, 1, "gloo timeout")),
        Row(e, Status(NEW), "run", None),
    ]
    figures = {"run-a": (10.0, 2.0), "run-b": (30.0, 5.0)}
    text = sweep_markdown(SPEC, plan, entries, figures)

    assert text.startswith("## Sweep `tiny`")
    assert row(text, "finished in this sweep")[1] == "1"
    assert row(text, "failed in this sweep")[1] == "1"
    assert row(text, "already done (a finished run from earlier)")[1] == "1"
    assert row(text, "still to run")[1] == "1"
    assert row(text, "grid points skipped as impossible")[1] == "1"
    # both single-device runs (the one done earlier and the one finished now) are in one row
    single = row(text, "`single`")
    assert single[1:4] == ["1", "2", f"{10.0 + 30.0:.4g}"]
    assert single[4] == f"{statistics.median([10.0, 30.0]):.4g}" and single[5] == f"{2.0 + 5.0:.4g}"
    assert "`ddp`" not in text.split("### Failed")[0]  # the failed ddp run has no figures
    assert f"`{d.run_name}` (run `run-d`, FAILED): gloo timeout" in text
    assert f"`{c.run_name}` (run `run-c0`, failed earlier, not retried): out of memory" in text
    assert "`L1-d16-h3-tp2`: `num_heads` must be divisible by num_devices (2)" in text


def test_nothing_finished_yet_says_so() -> None:
    plan = Plan(configs=(config(1),), skipped=(), hardware="cpu-x", device="cpu")
    text = sweep_markdown(SPEC, plan, [Row(config(1), Status(NEW), "run", None)], {})
    assert "No configuration has finished yet." in text and "### Failed" not in text


@pytest.mark.slow
def test_a_real_sweep_describes_its_children_on_the_parent(tracking_uri: str) -> None:
    from mlflow.tracking import MlflowClient

    from mlflow_roofline.sweep.runner import run_sweep
    from mlflow_roofline.train.device import hardware_name

    good = config(1)
    bad = unsplittable_tp_config()  # forced past planning: fails
    plan = Plan(configs=(good, bad), skipped=(), hardware=hardware_name("cpu"), device="cpu")
    client = MlflowClient()
    result = run_sweep(
        SPEC, plan, client.create_experiment("described"), client=TrackingClient(), progress=False, echo=lambda _: None
    )
    note = client.get_run(result.parent_run_id).data.tags[TAG_NOTE]
    child = client.get_run(next(r.outcome.run_id for r in result.results if r.config == good))
    assert row(note, "`single`")[3] == f"{child.data.metrics['energy_j']:.4g}"
    assert row(note, "finished in this sweep")[1] == "1" and row(note, "failed in this sweep")[1] == "1"
    assert re.search(rf"`{re.escape(bad.run_name)}` \(run `\w+`, FAILED\): .*num_heads", note)
