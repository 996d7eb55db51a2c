"""Run descriptions: the Markdown the MLflow UI shows at the top of a run's page."""

from __future__ import annotations

from mlflow_roofline.core.schema import MAX_NOTE_CHARS, TAG_NOTE
from mlflow_roofline.tracking.client import TrackingClient

CUT_LINE = "\n\n*(description cut to fit MLflow's tag limit; the run's artifacts hold everything)*\n"


def fit_note(markdown: str, limit: int = MAX_NOTE_CHARS) -> str:
    """``markdown`` cut at a line boundary to at most ``limit`` characters, saying so when cut."""
    if len(markdown) <= limit:
        return markdown
    room = limit - len(CUT_LINE)
    head = markdown[:room]
    head = head[: head.rfind("\n")] if "\n" in head else head
    return head.rstrip() + CUT_LINE


def description_tags(markdown: str) -> dict[str, str]:
    """The tag that makes ``markdown`` a run's description (``mlflow.note.content``), cut to the tag limit:
    for a caller that writes it in a batch with other tags."""
    return {TAG_NOTE: fit_note(markdown)}


def set_description(client: TrackingClient, run_id: str, markdown: str) -> None:
    """Make ``markdown`` the run's description (the tag ``mlflow.note.content``), cut to the tag limit."""
    client.set_tag(run_id, TAG_NOTE, fit_note(markdown))


HEADER_GAP = "&emsp;"
"""Space between header cells: the MLflow UI pads no table cell, and headers ran together."""


def md_table(header: list[str], rows: list[list[str]], align: str = "") -> str:
    """A Markdown table; ``align`` has one letter per column, ``l`` or ``r`` (default: left).

    Each header cell gets :data:`HEADER_GAP` on the side away from its alignment, so that
    neighbouring headers stay apart in the UI.
    """
    right = [align[i : i + 1] == "r" for i in range(len(header))]
    marks = ["---:" if r else "---" for r in right]
    spaced = [f"{HEADER_GAP}{cell}" if r else f"{cell}{HEADER_GAP}" for cell, r in zip(header, right)]
    lines = ["| " + " | ".join(spaced) + " |", "| " + " | ".join(marks) + " |"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)
