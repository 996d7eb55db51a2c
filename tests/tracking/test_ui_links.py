"""Links into the MLflow UI's Model training view, for a server or a local store."""

from __future__ import annotations

from mlflow_roofline.tracking.ui_links import experiment_line, experiment_url, run_url


def test_links_open_the_model_training_view() -> None:
    assert experiment_url("http://h:5000/", "3") == "http://h:5000/#/experiments/3/runs?workflowType=machine_learning"
    assert run_url("http://h", "3", "abc") == "http://h/#/experiments/3/runs/abc?workflowType=machine_learning"
    served = experiment_line("https://mlflow.example.org", "7")
    assert served.endswith("https://mlflow.example.org/#/experiments/7/runs?workflowType=machine_learning")
    local = experiment_line("sqlite:///mlflow.db", "1")
    assert "http://127.0.0.1:5000/#/experiments/1/runs?workflowType" in local
    assert local.endswith("(start it with: mlflow ui --backend-store-uri sqlite:///mlflow.db)")
