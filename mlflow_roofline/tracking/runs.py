"""The one paginator over ``MlflowClient.search_runs``: every matching run, page after page.

A store serves at most :data:`PAGE_SIZE` runs per call and hands back a page token while
more remain; callers iterate :func:`iter_runs` (or take :func:`search_all_runs`) instead of
writing the token loop themselves. ``search_runs`` always returns whole run entities
(params, metrics and tags): there is no column selection to push down to the store.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ParamSpec, TypeVar

from mlflow.entities import ViewType

P = ParamSpec("P")
T = TypeVar("T")

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


def _listed(iterate: Callable[P, Iterator[T]]) -> Callable[P, list[T]]:
    """``iterate`` with the same arguments, returning everything it yields as a list."""

    @functools.wraps(iterate)
    def listed(*args: P.args, **kwargs: P.kwargs) -> list[T]:
        return list(iterate(*args, **kwargs))

    listed.__doc__ = f"Every run :func:`{iterate.__name__}` yields, as a list (same arguments)."
    return listed


search_all_runs = _listed(iter_runs)
