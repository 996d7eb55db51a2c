"""One paginator over ``MlflowClient.search_runs``: every run a filter matches, page by page."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

PAGE_SIZE = 50_000
"""MLflow's ``SEARCH_MAX_RESULTS_THRESHOLD``: the largest page a store serves."""


def iter_runs(
    client: Any,
    experiment_ids: Sequence[str],
    filter_string: str = "",
    order_by: Sequence[str] | None = None,
    page_size: int = PAGE_SIZE,
) -> Iterator[Any]:
    """Yield every run of ``experiment_ids`` that ``filter_string`` matches, in store order."""
    token: str | None = None
    while True:
        page = client.search_runs(
            list(experiment_ids), filter_string=filter_string, order_by=list(order_by or []) or None,
            max_results=page_size, page_token=token,
        )
        yield from page
        token = page.token
        if not token:
            return
