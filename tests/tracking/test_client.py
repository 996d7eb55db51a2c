"""The typed door to MLflow, against a real SQLite store: batching past the store's limits,
the run lifecycle, search, and the registry lookups that answer None instead of raising."""

from __future__ import annotations

import mlflow

from mlflow_roofline.tracking.client import MetricPoint, TrackingClient


def test_log_splits_batches_past_the_store_limits(tracking_uri: str) -> None:
    client = TrackingClient()
    experiment_id = client.create_experiment("door")
    run_id = client.open_run(experiment_id, "batched", tags={"k": "v"})
    client.log(
        run_id,
        params={f"p{i}": str(i) for i in range(250)},
        metrics={f"m{i}": float(i) for i in range(2500)},
        tags={f"t{i}": "x" for i in range(150)},
    )
    client.log_history(run_id, [MetricPoint("loss", float(i), step=i) for i in range(1500)])
    run = client.get_run(run_id)
    assert len(run.data.params) == 250
    assert len(run.data.metrics) == 2501  # 2500 and the loss's last point
    assert run.data.tags["k"] == "v" and run.data.tags["t149"] == "x"
    assert run.info.run_name == "batched"
    history = client.metric_history(run_id, "loss")
    assert sorted(p.step for p in history) == list(range(1500))


def test_run_lifecycle_and_search(tracking_uri: str) -> None:
    client = TrackingClient()
    experiment_id = client.create_experiment("lifecycle")
    parent = client.open_run(experiment_id, "parent")
    child = client.open_run(experiment_id, "child", parent_run_id=parent)
    assert client.get_run(child).data.tags["mlflow.parentRunId"] == parent
    client.end_run(child, "FAILED")
    client.join_run(child, run_name="child-again")
    assert client.get_run(child).info.status == "RUNNING"
    client.end_run(child, "KILLED")
    assert client.get_run(child).info.status == "KILLED"
    found = client.search_runs([experiment_id], "attributes.status = 'KILLED'")
    assert [r.info.run_id for r in found] == [child]
    assert len(list(client.iter_runs([experiment_id], page_size=1))) == 2


def test_active_leaves_the_run_running_for_its_owner(tracking_uri: str) -> None:
    client = TrackingClient()
    run_id = client.open_run(client.create_experiment("active"), "owned")
    with client.active(run_id) as active_id:
        assert mlflow.active_run().info.run_id == active_id == run_id
        mlflow.log_metric("inside", 1.0)
    assert mlflow.active_run() is None
    run = client.get_run(run_id)
    assert run.info.status == "RUNNING"
    assert run.data.metrics["inside"] == 1.0


def test_registry_lookups_answer_none_for_what_is_missing(tracking_uri: str) -> None:
    client = TrackingClient()
    assert client.version_by_alias("no-such-model", "champion") is None
    assert not client.registered_model_exists("no-such-model")
    client.create_registered_model("m")
    assert client.registered_model_exists("m")
    assert client.version_by_alias("m", "champion") is None


def test_context_tags_are_those_the_fluent_api_adds(tracking_uri: str) -> None:
    client = TrackingClient()
    experiment_id = client.create_experiment("context")
    plain = client.get_run(client.open_run(experiment_id, "plain")).data.tags
    with_context = client.get_run(client.open_run(experiment_id, "with", tags={"k": "v"}, context_tags=True)).data.tags
    assert "mlflow.user" not in plain and "mlflow.source.name" not in plain
    assert with_context["k"] == "v" and with_context["mlflow.runName"] == "with"
    assert with_context["mlflow.user"] and with_context["mlflow.source.name"]


def test_a_batch_never_holds_more_than_1000_entities_in_all(tracking_uri: str) -> None:
    client = TrackingClient()
    run_id = client.open_run(client.create_experiment("limits"), "limits")
    sizes: list[tuple[int, int, int]] = []
    log_batch = client._client.log_batch

    def counted(run_id: str, metrics=(), params=(), tags=(), **kwargs) -> None:
        sizes.append((len(metrics), len(params), len(tags)))
        log_batch(run_id, metrics=metrics, params=params, tags=tags, **kwargs)

    client._client.log_batch = counted
    points = [MetricPoint("energy_j", float(i), step=i) for i in range(1950)]
    client.log_history(run_id, points, {f"t{i}": "x" for i in range(150)}, {f"p{i}": str(i) for i in range(120)})
    assert all(m + p + t <= 1000 and p <= 100 and t <= 100 for m, p, t in sizes), sizes
    assert sizes[0] == (800, 100, 100) and sum(m for m, _, _ in sizes) == 1950
    run = client.get_run(run_id)
    assert len(run.data.params) == 120 and run.data.tags["t149"] == "x"
    assert sorted(p.step for p in client.metric_history(run_id, "energy_j")) == list(range(1950))
