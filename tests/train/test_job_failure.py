"""Naming a failed job: the rank that failed first, and how."""

from __future__ import annotations

from mlflow_roofline.train.job_failure import job_error


def test_failed_job_is_named_by_its_traceback(tmp_path) -> None:
    (tmp_path / "error-rank1.txt").write_text("Traceback (most recent call last):\n  ...\nValueError: boom\n")
    error = job_error(tmp_path, 1, "ignored output", 2)
    assert str(error) == "training job failed (exit status 1): rank 1: ValueError: boom"
    assert "--- rank 1 ---" in error.detail and "Traceback" in error.detail
    (tmp_path / "error-rank1.txt").rename(tmp_path / "error-rank0.txt")
    assert str(job_error(tmp_path, 1, "", 1)) == "training job failed (exit status 1): ValueError: boom"


def test_killed_rank_is_named_before_the_ranks_that_failed_after_it(tmp_path) -> None:
    tail = (
        "Failures:\n[1]:\n  rank      : 0 (local_rank: 0)\n  exitcode  : 1 (pid: 6)\n"
        "Root Cause (first observed failure):\n[0]:\n  rank      : 1 (local_rank: 1)\n  exitcode  : -9 (pid: 7)\n"
    )
    (tmp_path / "error-rank0.txt").write_text("Traceback ...\nRuntimeError: Connection closed by peer\n")
    error = job_error(tmp_path, 1, tail, 2)
    assert str(error) == (
        "training job failed (exit status 1): rank 1 was killed by SIGKILL (out of memory?); "
        "then rank 0 failed: RuntimeError: Connection closed by peer"
    )
    assert str(job_error(tmp_path, -15, "", 2)).startswith("training job failed (killed by SIGTERM)")


def test_a_rank_torchrun_stopped_is_not_the_cause(tmp_path) -> None:
    tail = (
        "  rank      : 1 (local_rank: 1)\n  exitcode  : -15 (pid: 7)\n"
        "  rank      : 0 (local_rank: 0)\n  exitcode  : 1\n"
    )
    (tmp_path / "error-rank0.txt").write_text("Traceback ...\nValueError: bad batch\n")
    assert str(job_error(tmp_path, 1, tail, 2)) == "training job failed (exit status 1): rank 0: ValueError: bad batch"
