#!/usr/bin/env bash
# The sweep's two launches on the same small grid, side by side: `--launch warm` (each
# job's ranks forked from a server that imported torch once) and `--launch fresh` (a
# `mlflow-roofline train` process per configuration, torchrun for two ranks). Prints each
# configuration's energy and time under both, their ratio, and each sweep's wall time.
# On a CUDA machine this is the check that the warm launch measures what the fresh one
# does (NVML from forked ranks, NCCL meeting in a FileStore).
#
#   bash scripts/gpu_launch_check.sh                 # device cuda, 1 and 2 GPUs when visible
#   DEVICE=cpu STEPS=3 bash scripts/gpu_launch_check.sh   # the same on the CPU (gloo, estimate meter)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python}"
DEVICE="${DEVICE:-cuda}"
STEPS="${STEPS:-30}"
store=$(mktemp -d)
trap 'rm -rf "$store"' EXIT
export MLFLOW_TRACKING_URI="sqlite:///$store/mlflow.db"
devices=2
if [[ "$DEVICE" == "cuda" ]]; then
  devices=$("$PYTHON" -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)')
  if [[ "$devices" -lt 1 ]]; then echo "gpu_launch_check: no CUDA device visible" >&2; exit 1; fi
fi
multi=""
if [[ "$devices" -ge 2 ]]; then multi="  - {strategy: [ddp, fsdp, tp], num_devices: 2}"; fi
cat >"$store/spec.yaml" <<SPEC
experiment: launch-check
device: $DEVICE
precision: fp32
num_steps: $STEPS
warmup_steps: 5
num_layers: 4
hidden_size: 256
num_heads: 4
ffn_size: 1024
seq_len: 128
batch_size: 16
grid:
  - {strategy: single}
$multi
SPEC
for launch in warm fresh; do
  start=$SECONDS
  "$PYTHON" -m mlflow_roofline.cli sweep "$store/spec.yaml" --experiment "launch-$launch" --launch "$launch" --no-progress
  echo "== $launch: sweep wall $((SECONDS - start)) s"
done

"$PYTHON" - <<'PY'
from mlflow.tracking import MlflowClient

client = MlflowClient()


def runs(launch: str) -> dict[str, object]:
    experiment = client.get_experiment_by_name(f"launch-{launch}")
    found = client.search_runs([experiment.experiment_id], "tags.`roofline.run_type` = 'train'")
    return {r.info.run_name: r for r in found}


warm, fresh = runs("warm"), runs("fresh")
print(f"{'configuration':36} {'energy_j warm':>14} {'fresh':>10} {'ratio':>6} {'time_s warm':>12} {'fresh':>8} {'ratio':>6}")
for name in sorted(warm):
    w, f = warm[name].data.metrics, fresh[name].data.metrics if name in fresh else {}
    if "energy_j" not in w or "energy_j" not in f:
        print(f"{name:36} warm {warm[name].info.status}, fresh {fresh[name].info.status if name in fresh else '-'}")
        continue
    print(
        f"{name:36} {w['energy_j']:14.2f} {f['energy_j']:10.2f} {w['energy_j'] / f['energy_j']:6.3f} "
        f"{w['time_s']:12.3f} {f['time_s']:8.3f} {w['time_s'] / f['time_s']:6.3f}"
    )
PY
