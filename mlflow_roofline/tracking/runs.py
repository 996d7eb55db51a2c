"""The one paginator over ``MlflowClient.search_runs``: every matching run, page after page.

A store serves at most :data:`PAGE_SIZE` runs per call and hands back a page token while
more remain; callers iterate :func:`iter_runs` (or take :func:`search_all_runs`) instead of
writing the token loop themselves. ``search_runs`` always returns whole run entities
(params, metrics and tags): there is no column selection to push down to the store.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from mlflow.entities import ViewType

PAGE_SIZE = 50_000
"""Runs per ``search_runs`` call: MLflow's ``SEARCH_MAX_RESULTS_THRESHOLD``, the largest page a store serves."""


def iter_runs(
    client: Any,
    experiment_ids: Sequence[str],
    filter_string: str = "",
    order_by: Sequence[str] | None = None,
    run_view_type: int = ViewType.ACTIVE_ONLY,
    page_size: int = PAGE_SIZE,
) -> Iterator[Any]:
    """Yield every run of ``experiment_ids`` that matches ``filter_string``, in ``order_by`` order.

    Args:
        client: an ``MlflowClient``.
        experiment_ids: the experiments to search.
        filter_string: MLflow search syntax (``""``: every run).
        order_by: MLflow ``order_by`` clauses (``None``: the store's order, newest first).
        run_view_type: active, deleted or all runs (``mlflow.entities.ViewType``).
        page_size: runs fetched per call (1 .. :data:`PAGE_SIZE`).
    """
    token: str | None = None
    while True:
        page = client.search_runs(
            list(experiment_ids),
            filter_string=filter_string,
            run_view_type=run_view_type,
            max_results=page_size,
            order_by=list(order_by) if order_by else None,
            page_token=token,
        )
        yield from page
        token = page.token
        if not token:
            return


def search_all_runs(
    client: Any,
    experiment_ids: Sequence[str],
    filter_string: str = "",
    order_by: Sequence[str] | None = None,
    run_view_type: int = ViewType.ACTIVE_ONLY,
    page_size: int = PAGE_SIZE,
) -> list[Any]:
    """Every run :func:`iter_runs` yields, as a list."""
    return list(iter_runs(client, experiment_ids, filter_string, order_by, run_view_type, page_size))
