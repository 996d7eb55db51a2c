#!/usr/bin/env bash
# GPU readiness check of the `train` entry point: on a CUDA machine, one small BERT
# configuration per strategy through `mlflow run . -e train -P device=cuda`
#   single on 1 GPU; ddp, fsdp and tp on 2 GPUs (skipped when fewer are visible),
# then a table of each run's status, energy (NVML counter, else sampled power) and time.
#
#   bash scripts/gpu_check.sh            # fp32, a temp SQLite store
#   PRECISION=bf16 STEPS=50 bash scripts/gpu_check.sh
#   MLFLOW_TRACKING_URI=sqlite:///gpu.db bash scripts/gpu_check.sh   # keep the runs
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python}"
PRECISION="${PRECISION:-fp32}"
STEPS="${STEPS:-30}"
EXPERIMENT="${EXPERIMENT:-gpu-check}"
if [[ -z "${MLFLOW_TRACKING_URI:-}" ]]; then
  store=$(mktemp -d)
  trap 'rm -rf "$store"' EXIT
  export MLFLOW_TRACKING_URI="sqlite:///$store/mlflow.db"
fi
gpus=$("$PYTHON" -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)')
if [[ "$gpus" -lt 1 ]]; then
  echo "gpu_check: no CUDA device visible; nothing to check" >&2
  exit 1
fi
echo "== $gpus GPU(s) visible; precision $PRECISION, $STEPS steps; store $MLFLOW_TRACKING_URI"

# A small BERT (L4, d256, h4, ff1024, S128, B16): big enough for the energy counter to advance.
shape=(-P num_layers=4 -P hidden_size=256 -P num_heads=4 -P ffn_size=1024 -P seq_len=128 -P batch_size=16)
plan=("single 1")
if [[ "$gpus" -ge 2 ]]; then plan+=("ddp 2" "fsdp 2" "tp 2"); else echo "== 1 GPU: ddp, fsdp and tp need 2, skipped"; fi

status=0
for entry in "${plan[@]}"; do
  read -r strategy n <<<"$entry"
  echo "== $strategy x$n"
  "$PYTHON" -m mlflow run . -e train --env-manager local --experiment-name "$EXPERIMENT" "${shape[@]}" \
    -P strategy="$strategy" -P num_devices="$n" -P device=cuda -P precision="$PRECISION" \
    -P num_steps="$STEPS" -P warmup_steps=5 || status=1
done

"$PYTHON" - "$EXPERIMENT" <<'PY'
import sys

from mlflow.tracking import MlflowClient

client = MlflowClient()
experiment = client.get_experiment_by_name(sys.argv[1])
runs = client.search_runs([experiment.experiment_id], order_by=["attributes.start_time ASC"])
print(f"{'run':34} {'status':9} {'source':10} {'energy_j':>10} {'time_s':>8} {'power_w':>8} {'samples/s':>10}")
for run in runs:
    m, t = run.data.metrics, run.data.tags
    def fmt(key, spec):
        return format(m[key], spec) if key in m else "-"
    print(f"{run.info.run_name:34} {run.info.status:9} {t.get('roofline.energy_source', '-'):10} "
          f"{fmt('energy_j', '10.2f')} {fmt('time_s', '8.3f')} {fmt('avg_power_w', '8.1f')} "
          f"{fmt('samples_per_s', '10.1f')}")
    for key in ("roofline.energy_error", "roofline.energy_warning", "roofline.error"):
        if key in t:
            print(f"    {key}: {t[key].splitlines()[-1]}")
PY
# Shared-GPU check: two measured jobs on GPU 0 at once. Each logs energy_j (its share, by SM
# utilization) and energy_device_j (the whole GPU); over the same window the shares must sum to
# the device within 2 %. The two jobs start together and run the same length, so their windows match.
echo "== shared GPU: two jobs on GPU 0"
SHARED="${EXPERIMENT}-shared"
busy='import torch, time
x = torch.randn(4096, 4096, device="cuda")
end = time.time() + 20
while time.time() < end:
    x = x @ x; x = x / x.norm()
torch.cuda.synchronize()'
for job in a b; do
  CUDA_VISIBLE_DEVICES=0 "$PYTHON" -m mlflow_roofline.cli measure --experiment "$SHARED" --meter nvml \
    -- "$PYTHON" -c "$busy" &
done
wait || status=1
"$PYTHON" - "$SHARED" <<'PY' || status=1
import sys

from mlflow.tracking import MlflowClient

client = MlflowClient()
experiment = client.get_experiment_by_name(sys.argv[1])
runs = client.search_runs([experiment.experiment_id])
shares = [r.data.metrics.get("energy_j") for r in runs]
devices = [r.data.metrics.get("energy_device_j") for r in runs]
for r in runs:
    print(f"  {r.info.run_id}: energy_j={r.data.metrics.get('energy_j')} "
          f"energy_device_j={r.data.metrics.get('energy_device_j')} gpu_share={r.data.tags.get('roofline.gpu_share')}")
if len(runs) != 2 or None in shares or None in devices:
    sys.exit("shared-GPU check: expected two runs with energy_j and energy_device_j")
device = sum(devices) / 2
gap = abs(sum(shares) - device) / device
print(f"shares sum {sum(shares):.1f} J vs device {device:.1f} J: {100 * gap:.2f} % apart (limit 2 %)")
sys.exit(0 if gap <= 0.02 else 1)
PY
exit $status
