"""TrackingClient.iter_runs / search_runs, the one paginator over MLflow's search_runs, against a real SQLite store."""

from __future__ import annotations

from typing import Any

from mlflow_roofline.tracking.client import DELETED_ONLY, TrackingClient


class CountingClient:
    """The TrackingClient's inner MlflowClient, counting its search_runs calls (one per page)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0

    def search_runs(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.inner.search_runs(*args, **kwargs)


def _counting(client: TrackingClient) -> CountingClient:
    counting = CountingClient(client._client)
    client._client = counting  # type: ignore[assignment] # the test's spy on the store calls
    return counting


def _runs(client: TrackingClient, experiment_id: str, n: int) -> list[str]:
    ids = []
    for i in range(n):
        run_id = client.open_run(experiment_id, tags={"kind": "even" if i % 2 == 0 else "odd"})
        client.log(run_id, metrics={"rank": float(i)})
        client.end_run(run_id)
        ids.append(run_id)
    return ids


def test_every_page_is_followed_with_filter_and_order(tracking_uri: str) -> None:
    client = TrackingClient(tracking_uri)
    experiment_id = client.create_experiment("pages")
    ids = _runs(client, experiment_id, 7)
    counting = _counting(client)

    even = list(client.iter_runs([experiment_id], "tags.kind = 'even'", ["metrics.rank DESC"], page_size=2))
    assert [r.info.run_id for r in even] == [ids[6], ids[4], ids[2], ids[0]]
    assert counting.calls == 2  # two full pages of 2; the second carries no token

    counting.calls = 0
    everything = list(client.iter_runs([experiment_id], order_by=["metrics.rank ASC"], page_size=3))
    assert [r.info.run_id for r in everything] == ids
    assert counting.calls == 3  # 3 + 3 + 1

    counting.calls = 0
    listed = client.search_runs([experiment_id], order_by=["metrics.rank ASC"])
    assert [r.info.run_id for r in listed] == ids
    assert counting.calls == 1  # one page holds them all


def test_view_type_reaches_deleted_runs(tracking_uri: str) -> None:
    client = TrackingClient(tracking_uri)
    experiment_id = client.create_experiment("deleted")
    ids = _runs(client, experiment_id, 3)
    client.delete_run(ids[1])
    assert {r.info.run_id for r in client.search_runs([experiment_id])} == {ids[0], ids[2]}
    deleted = client.search_runs([experiment_id], view=DELETED_ONLY)
    assert [r.info.run_id for r in deleted] == [ids[1]]
