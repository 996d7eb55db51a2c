#!/usr/bin/env bash
# mypy and the import contracts, beside the suite (`make test`), at the lowest priority that this
# kernel honours. With autogroup scheduling (/proc/sys/kernel/sched_autogroup_enabled = 1, as on
# the CI machine) `nice` only ranks processes inside one session's group, and groups share the CPU
# equally: mypy in make's session took half the CPU whenever the pytest workers waited on ranks,
# sweeps and servers in sessions of their own. Run under `setsid`, this script lowers its own
# session's group to nice 19 (a process may always lower its group's priority) before it starts.
# Usage: setsid -w scripts/background_checks.sh VENV_BIN
set -euo pipefail
bin=$1
echo 19 >/proc/self/autogroup 2>/dev/null || true  # no autogroup here: plain nice below still applies
nice -n 19 "$bin/mypy" mlflow_roofline
nice -n 19 "$bin/lint-imports"
