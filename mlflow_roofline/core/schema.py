"""The public names of the run schema (DESIGN.md): params, metrics, tags and choices.

Users compare runs in the MLflow UI by these names, the fit reads them and the served
model takes them, so every module refers to them through this one place.
"""

from __future__ import annotations

STRATEGIES: tuple[str, ...] = ("single", "ddp", "fsdp", "tp")
"""Parallel strategies: one device, data parallel, fully sharded data parallel, tensor parallel."""

DATA_PARALLEL_STRATEGIES: tuple[str, ...] = ("ddp", "fsdp")


def present_strategies(values: object) -> list[str]:
    """The strategies found in ``values`` (an iterable of names), in :data:`STRATEGIES` order.

    ``single`` first, so it is the reference level of the laws' strategy factor.
    """
    found = {str(v) for v in values}  # type: ignore[attr-defined]
    return [s for s in STRATEGIES if s in found]
DEVICES: tuple[str, ...] = ("cuda", "cpu")
DEVICE_CHOICES: tuple[str, ...] = ("auto",) + DEVICES
PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "fp16")
ENERGY_SOURCES: tuple[str, ...] = ("nvml", "nvml_power", "rapl", "estimate")
RUN_TYPES: tuple[str, ...] = ("train", "sweep", "fit", "measure")

# Train-run params, in the order DESIGN.md lists them.
PARAM_NAMES: tuple[str, ...] = (
    "num_layers",
    "hidden_size",
    "num_heads",
    "ffn_size",
    "seq_len",
    "batch_size",
    "num_steps",
    "warmup_steps",
    "strategy",
    "num_devices",
    "device",
    "precision",
)

# Params that define the workload, independent of how (and how long) it is run.
WORKLOAD_PARAM_NAMES: tuple[str, ...] = tuple(
    p for p in PARAM_NAMES if p not in ("strategy", "num_devices", "num_steps", "warmup_steps")
)

# Metrics (totals are over the measured window and all devices).
M_PROXY_PARAMS = "proxy_params"
M_PROXY_FLOPS_PER_TOKEN = "proxy_flops_per_token"
M_PROXY_FLOPS = "proxy_flops"
M_PROXY_MEM_TRAFFIC = "proxy_mem_traffic"
M_ARITHMETIC_INTENSITY = "proxy_arithmetic_intensity"
M_FLOPS_COUNTED = "flops_counted"
M_ENERGY_J = "energy_j"
M_TIME_S = "time_s"
M_STEP_TIME_S = "step_time_s"
M_SAMPLES_PER_S = "samples_per_s"
M_AVG_POWER_W = "avg_power_w"
M_FINAL_LOSS = "final_loss"
M_LOSS = "loss"  # per-step history (step = index of the measured step) of the global-batch loss

# Train-run param beyond DESIGN.md's: the energy meter asked for (as `mlflow run` logs it).
P_METER = "meter"

# Tags.
TAG_RUN_TYPE = "roofline.run_type"
TAG_ENERGY_SOURCE = "roofline.energy_source"
TAG_HARDWARE = "roofline.hardware"
TAG_CONFIG_HASH = "roofline.config_hash"
TAG_WORKLOAD_HASH = "roofline.workload_hash"
TAG_ERROR = "roofline.error"
TAG_ENERGY_ERROR = "roofline.energy_error"
TAG_ENERGY_WARNING = "roofline.energy_warning"
TAG_ENERGY_SCOPE = "roofline.energy_scope"  # what one reading covers: device, node or process
TAG_DEVICE = "roofline.device"  # train: the resolved device (the param may say "auto")
TAG_COMMAND = "roofline.command"  # measure: the measured command line
TAG_EXIT_CODE = "roofline.exit_code"  # measure: its exit status
# Fit run and registered model versions.
TAG_FORM = "roofline.form"  # the energy-law form registered
TAG_FIT_RUN_ID = "roofline.fit_run_id"  # model version: the fit run that made it
TAG_CV_MAPE = "roofline.cv_mape"  # model version: its cv_mape, in percent
TAG_PARENT_RUN_ID = "mlflow.parentRunId"  # MLflow's own nesting tag
TAG_NOTE = "mlflow.note.content"  # MLflow's run description, rendered as Markdown by the UI
# Experiment tag: MLflow's kind of an experiment, which picks the UI's view of it.
TAG_EXPERIMENT_KIND = "mlflow.experimentKind"
EXPERIMENT_KIND_MODEL_TRAINING = "custom_model_development"  # the UI's "Model training" view

MAX_TAG_CHARS = 5000
"""Longest tag value this package writes (MLflow refuses or truncates past 8000 characters)."""

DEFAULT_EXPERIMENT = "roofline-bert"
DEFAULT_MODEL_NAME = "roofline-energy"
MISSING_BASELINE_CHOICES: tuple[str, ...] = ("law", "drop")  # fit: eta of runs without a single-device run
DEFAULT_ALIAS = "champion"
