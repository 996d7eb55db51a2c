#!/usr/bin/env bash
# The main job end to end on the embedded defaults: CPU, SQLite store (./mlflow.db).
#   1. sweep the shipped `smoke` spec (BERT encoders) and the `decoder-smoke` spec (GPT-2
#      decoders, LoRA, checkpointing) into one experiment (every config one MLflow train run),
#   2. fit one law on both kinds (their energy is the labelled CPU estimate): forms in the
#      complete proxies (vocabulary head, optimizer bytes, arch as a categorical) compete
#      with the paper's; register the model as roofline-energy@champion,
#   3. serve it with `mlflow models serve`, send one query, print the answer; ask the same job as a
#      decoder (the answer says whether and why it differs) and for a recommendation up to 4
#      devices (ties and extrapolations said), then print the experiment's Model training link.
set -euo pipefail
cd "$(dirname "$0")/.."
export MLFLOW_TRACKING_URI="${MLFLOW_TRACKING_URI:-sqlite:///mlflow.db}"
experiment="${ROOFLINE_EXPERIMENT:-roofline-bert}"
echo "== tracking store: $MLFLOW_TRACKING_URI, experiment: $experiment"

echo "== 1/3 sweep (specs smoke and decoder-smoke, one experiment)"
mlflow run . -e sweep --env-manager local --experiment-name "$experiment" -P spec=smoke
# decoder-smoke names its own experiment; --experiment puts its runs beside the encoders'.
mlflow-roofline sweep decoder-smoke --experiment "$experiment"

echo "== 2/3 fit"
mlflow run . -e fit --env-manager local --experiment-name "$experiment" \
  -P experiment="$experiment" -P allow_estimate=true

echo "== 3/3 serve models:/roofline-energy@champion and query it"
port=$(python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
log=$(mktemp)
mlflow models serve -m "models:/roofline-energy@champion" --env-manager local -h 127.0.0.1 -p "$port" >"$log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 1 120); do
  curl -sf "http://127.0.0.1:$port/ping" >/dev/null && break
  kill -0 "$server" 2>/dev/null || { cat "$log"; echo "server exited" >&2; exit 1; }
  sleep 0.5
done
# A workload inside the smoke grid's ranges (outside them the answer says extrapolated: true).
query='{"dataframe_records": [{"num_layers": 2, "hidden_size": 64, "num_heads": 2, "ffn_size": 256,
  "seq_len": 32, "batch_size": 8, "num_steps": 20, "strategy": "ddp", "num_devices": 2}]}'
echo "POST /invocations $query"
curl -sf "http://127.0.0.1:$port/invocations" -H 'Content-Type: application/json' -d "$query"
echo
echo "== the same job as a GPT-2-style decoder (V = 1000, as decoder-smoke trains), and why it differs or not"
mlflow-roofline predict --model "models:/roofline-energy@champion" --num-layers 2 --hidden-size 64 \
  --num-heads 2 --ffn-size 256 --seq-len 32 --batch-size 8 --num-steps 20 --strategy ddp --num-devices 2 \
  --arch decoder --vocab-size 1000
echo "== recommendation for the encoder job, up to 4 devices (the sweep measured 1, 2 and 3)"
mlflow-roofline predict --model "models:/roofline-energy@champion" --num-layers 2 --hidden-size 64 \
  --num-heads 2 --ffn-size 256 --seq-len 32 --batch-size 8 --num-steps 20 --recommend --max-devices 4
echo "== done; every run, the fit's plots and the model in the MLflow UI:"
python -c 'import sys; from mlflow_roofline.tracking.client import TrackingClient; from mlflow_roofline.tracking.ui_links import experiment_line; c = TrackingClient(); print(experiment_line(c.tracking_uri, c.experiment_by_name(sys.argv[1]).experiment_id))' "$experiment"
