"""``mlflow-roofline measure`` end to end: a real child command, a real SQLite store.

The runs that need a process of their own (the child's output forwarded to measure's own
streams, a SIGTERM, an energy figure that must count the child's CPU alone) and the help go
through the console script; the others call the CLI's ``main`` in this process
(support/cli_in_process), the measured command still a real child.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest
from support.cli_in_process import run_cli

CLI = str(Path(sys.executable).parent / "mlflow-roofline")
PY = sys.executable


def measure(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, "measure", *args], capture_output=True, text=True, timeout=timeout)


def _nvml_works() -> bool:
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


def all_runs() -> list:
    return mlflow.search_runs(search_all_experiments=True, output_format="list")


@pytest.mark.slow
def test_measure_logs_a_finished_run_and_forwards_output(tracking_uri: str) -> None:
    code = (
        "import sys, time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"
        "print('out-line'); print('err-line', file=sys.stderr)"
    )
    proc = measure("--experiment", "mine", "--", PY, "-c", code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["out-line"]
    assert "err-line" in proc.stderr
    (run,) = all_runs()
    assert mlflow.get_experiment(run.info.experiment_id).name == "mine"
    assert run.info.status == "FINISHED"
    tags, metrics = run.data.tags, run.data.metrics
    assert tags["roofline.run_type"] == "measure"
    assert tags["roofline.energy_source"] == "estimate"
    assert tags["roofline.hardware"].startswith("cpu:")
    assert tags["roofline.exit_code"] == "0"
    assert tags["roofline.command"].startswith(PY)
    # The child's 0.3 s busy loop plus interpreter start-up, at 6 W per busy core.
    assert 0.3 * 6 <= metrics["energy_j"] < 3.0 * 6
    assert metrics["time_s"] >= 0.3
    assert metrics["avg_power_w"] == pytest.approx(metrics["energy_j"] / metrics["time_s"])
    assert run.info.run_id in proc.stderr
    # The System metrics tab: from the window's opening to its close, which is energy_j (one joule figure).
    history = mlflow.MlflowClient().get_metric_history(run.info.run_id, "system/cpu_energy_wh")
    assert len(history) >= 2 and [p.value for p in history] == sorted(p.value for p in history)
    assert history[-1].value == pytest.approx(metrics["energy_j"] / 3600, rel=1e-9)
    assert tags["roofline.system_energy_source"] == "estimate"


@pytest.mark.slow
def test_failing_command_gives_a_failed_run_and_its_exit_code(tracking_uri: str) -> None:
    proc = run_cli("measure", "--", PY, "-c", "import sys; sys.exit(7)")
    assert proc.returncode == 7
    (run,) = all_runs()
    assert run.info.status == "FAILED"
    assert run.data.tags["roofline.exit_code"] == "7"
    assert mlflow.get_experiment(run.info.experiment_id).name == "Default"
    assert "time_s" in run.data.metrics


@pytest.mark.slow
def test_terminated_measure_passes_sigterm_on_and_ends_the_run(tracking_uri: str) -> None:
    code = "import time; print('ready', flush=True); time.sleep(60)"
    proc = subprocess.Popen([CLI, "measure", "--", PY, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    (run,) = all_runs()
    assert run.info.status == "KILLED"
    assert run.data.tags["roofline.error"] == "killed by SIGTERM"
    assert run.data.tags["roofline.exit_code"] == str(128 + signal.SIGTERM)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--meter", "joules", "--", "true"],
            "meter: must be one of auto, nvml, nvml_power, rocm, rapl, estimate, got 'joules'",
        ),
        (["--meter", "nvml", "--", "true"], "meter nvml is not available here"),
        (["--meter", "rapl", "--", "true"], "choices: auto, nvml, nvml_power, rocm, rapl, estimate"),
        ([], "COMMAND: give the command to measure after --"),
        (["--"], "COMMAND: give the command to measure after --"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_no_run(unopened_tracking_uri: str, args: list[str], message: str) -> None:
    if "rapl" in args and Path("/sys/class/powercap/intel-rapl:0/energy_uj").exists():
        pytest.skip("RAPL exists on this machine")
    if "nvml" in args and _nvml_works():
        pytest.skip("NVML works on this machine")
    proc = run_cli("measure", *args)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0], proc.stderr
    assert not Path("mlflow.db").exists() or all_runs() == []


def test_command_not_found_exits_127_without_a_run(unopened_tracking_uri: str) -> None:
    proc = run_cli("measure", "--", "no-such-command-xyz", "arg")
    assert proc.returncode == 127
    assert proc.stderr.strip() == "Error: COMMAND: 'no-such-command-xyz' is not an executable on PATH"
    assert not Path("mlflow.db").exists() or all_runs() == []


def test_help_shows_the_usage() -> None:
    proc = subprocess.run([CLI, "measure", "--help"], capture_output=True, text=True, timeout=60, env=os.environ)
    assert proc.returncode == 0
    assert "--meter auto|nvml|nvml_power|rocm|rapl|estimate" in proc.stdout and "COMMAND" in proc.stdout


@pytest.mark.slow
def test_watts_per_core_option_sets_the_estimate_figure(tracking_uri: str) -> None:
    code = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"
    proc = measure("--watts-per-core", "60", "--", PY, "-c", code)  # a process of its own: only the child's CPU
    assert proc.returncode == 0, proc.stderr
    (run,) = all_runs()
    # The child's 0.3 s of CPU plus interpreter start-up, at 60 W per busy core.
    assert 0.3 * 60 <= run.data.metrics["energy_j"] < 3.0 * 60
    assert run.data.tags["roofline.energy_source"] == "estimate"


def test_bad_watts_per_core_is_named_and_logs_nothing(tracking_uri: str) -> None:
    proc = run_cli("measure", "--watts-per-core", "-3", "--", PY, "-c", "pass")
    assert proc.returncode == 2
    assert (
        proc.stderr.strip().splitlines()[-1]
        == "Error: watts_per_core: must be a positive number of watts per busy core, "
        "at most 100 (no CPU core draws more), got '-3'"
    )
    assert all_runs() == []
