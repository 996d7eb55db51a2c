"""Markdown for run descriptions: tables whose headers stay apart in the MLflow UI, notes cut to the limit."""

from __future__ import annotations

from mlflow_roofline.core.schema import MAX_NOTE_CHARS
from mlflow_roofline.tracking.notes import CUT_LINE, HEADER_GAP, fit_note, md_table


def test_header_cells_keep_a_gap_on_the_side_away_from_their_alignment() -> None:
    table = md_table(["strategy", "energy (J), total", "energy (J), median"], [["`ddp`", "8.5", "4.2"]], "lrr")
    header, marks, row = table.splitlines()
    assert header == f"| strategy{HEADER_GAP} | {HEADER_GAP}energy (J), total | {HEADER_GAP}energy (J), median |"
    assert marks == "| --- | ---: | ---: |" and row == "| `ddp` | 8.5 | 4.2 |"


def test_a_note_is_cut_at_a_line_to_mlflows_limit_and_says_so() -> None:
    short = "## a\n\nb\n"
    assert fit_note(short) == short
    long = "\n".join(f"line {i} " + "x" * 90 for i in range(200))
    cut = fit_note(long)
    assert len(cut) <= MAX_NOTE_CHARS and cut.endswith(CUT_LINE) and len(long) > MAX_NOTE_CHARS
