"""What a job's processes report: rank readings reduced to the job's, and the job's files."""

from __future__ import annotations

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.train import worker
from mlflow_roofline.train.job_io import JobResult, JobSpec, RankEnergy
from mlflow_roofline.train.worker import _report


def _result(ranks: list[RankEnergy], scope: str = "process") -> JobResult:
    return _report(10, [0.7, 0.6], [0.1, 0.3, 0.2], ranks, "estimate", scope)


def test_process_and_device_readings_are_summed_over_ranks() -> None:
    result = _result([RankEnergy(0, True, 2.0, 1.0), RankEnergy(1, True, 3.0, 1.2)])
    assert result.energy_j == 5.0 and result.time_s == 1.2 and result.step_time_s == 0.2
    assert result.energy_error is None


def test_a_node_meter_counts_once_per_node() -> None:
    # rank 1 shares the node with rank 0 and did not read the node-wide counter
    result = _result([RankEnergy(0, True, 40.0, 1.0), RankEnergy(1, False, None, 1.0)], scope="node")
    assert result.energy_j == 40.0 and result.energy_error is None


def test_one_failed_reading_voids_the_total_and_says_which_rank() -> None:
    ranks = [RankEnergy(0, True, 2.0, 1.0, warning="coarse"), RankEnergy(1, True, None, 1.0, error="counter stuck")]
    result = _result(ranks)
    assert result.energy_j is None
    assert result.energy_error == "rank 1: counter stuck"
    assert result.energy_warning == "rank 0: coarse"


def test_job_files_round_trip(tmp_path) -> None:
    spec = JobSpec({"num_layers": "2"}, meter="estimate", seed=3)
    spec.write(tmp_path)
    assert JobSpec.read(tmp_path) == spec
    result = _result([RankEnergy(0, True, 2.0, 1.0)])
    result.write(tmp_path)
    assert JobResult.read(tmp_path) == result


def test_a_job_handed_its_step_flops_does_not_count_them_again(tmp_path, monkeypatch) -> None:
    # A sweep that measured the workload before hands its count to the next strategy's job.
    def no_count(*args: object, **kwargs: object) -> int:
        raise AssertionError("the FLOPs were counted again")

    monkeypatch.setattr(worker, "count_step_flops", no_count)
    params = TrainConfig(1, 16, 2, 32, 8, 2, num_steps=2, warmup_steps=0).to_params()
    result = worker.run_job(JobSpec(params, meter="estimate", flops_per_step=12345))
    assert result is not None and result.flops_per_step == 12345
