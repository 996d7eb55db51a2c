"""The one paginator over search_runs, against a real SQLite store."""

from __future__ import annotations

from typing import Any

from mlflow import MlflowClient
from mlflow.entities import ViewType

from mlflow_roofline.tracking.runs import iter_runs, search_all_runs


class CountingClient:
    """A real MlflowClient that counts its search_runs calls (one per page)."""

    def __init__(self, client: MlflowClient) -> None:
        self.client = client
        self.calls = 0

    def search_runs(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.client.search_runs(*args, **kwargs)


def _runs(client: MlflowClient, experiment_id: str, n: int) -> list[str]:
    ids = []
    for i in range(n):
        run = client.create_run(experiment_id, tags={"kind": "even" if i % 2 == 0 else "odd"})
        client.log_metric(run.info.run_id, "rank", float(i))
        client.set_terminated(run.info.run_id)
        ids.append(run.info.run_id)
    return ids


def test_every_page_is_followed_with_filter_and_order(tracking_uri: str) -> None:
    client = MlflowClient(tracking_uri)
    experiment_id = client.create_experiment("pages")
    ids = _runs(client, experiment_id, 7)
    counting = CountingClient(client)

    even = list(iter_runs(counting, [experiment_id], "tags.kind = 'even'", ["metrics.rank DESC"], page_size=2))
    assert [r.info.run_id for r in even] == [ids[6], ids[4], ids[2], ids[0]]
    assert counting.calls == 2  # two full pages of 2; the second carries no token

    counting.calls = 0
    everything = search_all_runs(counting, [experiment_id], order_by=["metrics.rank ASC"], page_size=3)
    assert [r.info.run_id for r in everything] == ids
    assert counting.calls == 3  # 3 + 3 + 1


def test_view_type_reaches_deleted_runs(tracking_uri: str) -> None:
    client = MlflowClient(tracking_uri)
    experiment_id = client.create_experiment("deleted")
    ids = _runs(client, experiment_id, 3)
    client.delete_run(ids[1])
    assert {r.info.run_id for r in search_all_runs(client, [experiment_id])} == {ids[0], ids[2]}
    deleted = search_all_runs(client, [experiment_id], run_view_type=ViewType.DELETED_ONLY)
    assert [r.info.run_id for r in deleted] == [ids[1]]
