"""The public names of the run schema (docs/schema.md): params, metrics, tags and choices.

Users compare runs in the MLflow UI by these names, the fit reads them and the served
model takes them, so every module refers to them through this one place.
"""

from __future__ import annotations

from mlflow_roofline.core import job_table

STRATEGIES: tuple[str, ...] = job_table.levels("strategy")
"""Parallel strategies: one device, data parallel, fully sharded data parallel, tensor parallel."""

DATA_PARALLEL_STRATEGIES: tuple[str, ...] = ("ddp", "fsdp")


def present_strategies(values: object) -> list[str]:
    """The strategies found in ``values`` (an iterable of names), in :data:`STRATEGIES` order.

    ``single`` first, so it is the reference level of the laws' strategy factor.
    """
    found = {str(v) for v in values}  # type: ignore[attr-defined]
    return [s for s in STRATEGIES if s in found]


DEVICES: tuple[str, ...] = job_table.levels("device")
DEVICE_CHOICES: tuple[str, ...] = (job_table.AUTO,) + DEVICES
PRECISION = "precision"
"""The job column of the matmuls' compute precision (its levels: :data:`PRECISIONS`)."""
PRECISIONS: tuple[str, ...] = job_table.levels(PRECISION)
ENERGY_SOURCE_DEVICE_KINDS: dict[str, str] = {
    "nvml": "cuda",
    "nvml_power": "cuda",
    "rocm": "cuda",  # AMD GPUs: PyTorch's ROCm build names them cuda
    "rapl": "cpu",
    "estimate": "cpu",
}
"""Each energy source (a meter, best first) and the device kind it measures (the meter registry,
:data:`energy.select.METER_KINDS`, is built from it)."""
ENERGY_SOURCES: tuple[str, ...] = tuple(ENERGY_SOURCE_DEVICE_KINDS)
DEVICE_ENERGY_SOURCES: tuple[str, ...] = tuple(s for s, kind in ENERGY_SOURCE_DEVICE_KINDS.items() if kind != "cpu")
"""The energy sources that read the accelerators alone (their board power bounds a run's average power)."""
RUN_TYPES: tuple[str, ...] = ("train", "sweep", "fit", "measure")

SIZE_NAMES: tuple[str, ...] = job_table.names(group="size")
"""A job's integer sizes: layers, width, heads, FFN width, tokens per sample, samples per step, optimizer steps."""

PARAM_NAMES: tuple[str, ...] = job_table.names(paper=True)
"""The paper's train-run params (every train run has logged them), in the job table's order."""

ARCHS: tuple[str, ...] = job_table.levels("arch")
"""Model kinds: the paper's BERT sequence classification (the default), a GPT-2 causal LM."""
PEFTS: tuple[str, ...] = job_table.levels("peft")
"""Parameter-efficient fine-tuning: every weight trained, or LoRA adapters only."""
DEFAULT_VOCAB_SIZE: dict[str, int] = job_table.defaults_by_level("vocab_size")
"""V of each arch when a run does not say: BERT-base's WordPiece, GPT-2's BPE vocabulary."""

KIND_PARAM_NAMES: tuple[str, ...] = job_table.names(paper=False)
"""Train-run params beyond the paper's, in the job table's order: what kind of model is
trained and how. Each has a default, and a run or model logged before they existed is read
with it; :data:`PARAM_NAMES` stays the params every train run has always logged."""

TRAIN_PARAM_NAMES: tuple[str, ...] = tuple(c.name for c in job_table.JOB_COLUMNS)
"""Every param a train run logs (docs/schema.md's table), the paper's first."""

LAW_INPUT_NAMES: tuple[str, ...] = (*SIZE_NAMES, *job_table.names(group="placement"))
"""The job columns the served law requires (docs/schema.md), in order; the kind columns, ``speedup``
and ``hardware`` are optional beside them."""

HARDWARE_COLUMN = "hardware"
"""The column naming the GPU a row is on: the fit's frame of runs, a pooled law's factor, the served model's input."""

REQUEST_KIND_NAMES: tuple[str, ...] = job_table.names(group="kind", request=True)
"""The optional job columns of a request: what kind of model the job trains and how (precision first)."""

# Params that define the workload, independent of how (and how long) it is run.
WORKLOAD_PARAM_NAMES: tuple[str, ...] = tuple(
    p for p in PARAM_NAMES if p not in ("strategy", "num_devices", "num_steps", "warmup_steps")
)
# The workload hash also reads KIND_PARAM_NAMES, each only where it differs from its default
# (core/config.py), so that runs logged before those params existed keep their hashes.

# Metrics (totals are over the measured window and all devices).
M_PROXY_PARAMS = "proxy_params"
M_PROXY_FLOPS_PER_TOKEN = "proxy_flops_per_token"
M_PROXY_FLOPS = "proxy_flops"
M_PROXY_MEM_TRAFFIC = "proxy_mem_traffic"
M_ARITHMETIC_INTENSITY = "proxy_arithmetic_intensity"
# Proxies beyond the paper's, logged beside them: the vocabulary head's FLOPs on the
# paper's scale, parameters with embeddings, those the optimizer updates, optimizer-state bytes.
M_PROXY_FLOPS_HEAD = "proxy_flops_head"
M_PROXY_PARAMS_TOTAL = "proxy_params_total"
M_PROXY_PARAMS_TRAINABLE = "proxy_params_trainable"
M_PROXY_OPT_TRAFFIC = "proxy_opt_traffic"
KIND_PROXY_METRICS: tuple[str, ...] = (
    M_PROXY_FLOPS_HEAD,
    M_PROXY_PARAMS_TOTAL,
    M_PROXY_PARAMS_TRAINABLE,
    M_PROXY_OPT_TRAFFIC,
)
"""The proxies that need the params beyond the paper's (the arch, V, the adapters)."""
M_FLOPS_COUNTED = "flops_counted"
M_ENERGY_J = "energy_j"
M_ENERGY_DEVICE_J = "energy_device_j"  # the whole GPU's joules when energy_j is this job's share of it
M_TIME_S = "time_s"
M_STEP_TIME_S = "step_time_s"
M_SAMPLES_PER_S = "samples_per_s"
M_AVG_POWER_W = "avg_power_w"
M_FINAL_LOSS = "final_loss"
M_LOSS = "loss"  # per-step history (step = index of the measured step) of the global-batch loss
# Emissions and cost of energy_j (core/carbon.py): kWh, grams CO2e (x PUE x intensity), price x PUE x kWh.
M_ENERGY_KWH = "energy_kwh"
M_CO2E_G = "co2e_g"
M_COST = "cost"
# Carbon beyond the meter (core/footprint.py): the job's device-hours' share of its GPUs' manufacturing
# emissions, grams CO2e; the water its electricity costs on site and at the power plants, litres.
M_EMBODIED_CO2E_G = "embodied_co2e_g"
M_WATER_L = "water_l"
# Beyond energy_j (train runs): the warm-up window, the node's CPU and DRAM (RAPL beside a GPU meter),
# their sum with energy_j, the NVML counter/power-integral cross-check (relative difference), power history.
M_WARMUP_ENERGY_J = "warmup_energy_j"
M_ENERGY_CPU_J = "energy_cpu_j"
M_ENERGY_DRAM_J = "energy_dram_j"
M_ENERGY_NODE_J = "energy_node_j"
M_ENERGY_METER_DISAGREEMENT = "energy_meter_disagreement"
M_POWER_W = "power_w"  # history: one point per (downsampled) meter sample, timestamp = sample time
POWER_PLOT_ARTIFACT = "power_timeline.png"
FIT_ENERGY_METRICS: dict[str, str] = {"gpu": M_ENERGY_J, "node": M_ENERGY_NODE_J}
"""``fit --energy``: which metric the law learns (the meter's devices, or the whole node)."""
# Histories of a run measured inside the user's own training loop (step = the optimizer's global step):
# energy_j and time_s are cumulative over the window at each logging step, their last value the total.
M_ENERGY_INTERVAL_J = "energy_interval_j"  # joules since the previous logging step (sums to energy_j)
M_ENERGY_PER_STEP_J = "energy_per_step_j"  # mean joules per optimizer step since the previous logging step
# power_w (above): on these runs, the mean power since the previous logging step, watts
M_ENERGY_FORECAST_J = "energy_forecast_j"  # forecast of energy_j for the whole planned window, joules
M_ENERGY_FORECAST_LOWER_J = "energy_forecast_j_lower"  # its 95 % prediction interval
M_ENERGY_FORECAST_UPPER_J = "energy_forecast_j_upper"
M_TIME_FORECAST_S = "time_forecast_s"  # forecast of time_s for the whole planned window, seconds

# Train-run param beyond docs/schema.md's: the energy meter asked for (as `mlflow run` logs it).
P_METER = "meter"

# Tags.
TAG_RUN_TYPE = "roofline.run_type"
TAG_SOURCE = "roofline.source"  # who measured a train run: train, trainer, accelerate, lightning, import:<format>
SOURCE_TRAIN = "train"  # this project's own train job (mlflow-roofline train, a sweep's child)
SOURCE_TRAINER = "trainer"  # the Hugging Face Trainer callback
SOURCE_ACCELERATE = "accelerate"  # the Accelerate loop hook
SOURCE_LIGHTNING = "lightning"  # the PyTorch Lightning callback
TAG_ENERGY_SOURCE = "roofline.energy_source"
TAG_HARDWARE = "roofline.hardware"
TAG_CONFIG_HASH = "roofline.config_hash"
TAG_WORKLOAD_HASH = "roofline.workload_hash"
TAG_BASELINE = "roofline.baseline"  # train: how the fit found a parallel run's single-device time (BASELINE_KINDS)
TAG_REPEAT = "roofline.repeat"
"""Which measured run of its configuration a train run is: 0 .. repeats-1 (absent: 0)."""
TAG_ERROR = "roofline.error"
TAG_ENERGY_ERROR = "roofline.energy_error"
TAG_ENERGY_WARNING = "roofline.energy_warning"
TAG_ENERGY_SCOPE = "roofline.energy_scope"  # what one reading covers: device, node, process or module
SCOPE_MODULE = "module"  # a Grace Hopper module: the GPU reading covers the Grace CPU and memory too
TAG_GPU_SHARE = "roofline.gpu_share"  # how energy_j was told from a shared GPU's energy_device_j
GPU_SHARE_EXCLUSIVE = "exclusive"  # no other process used the GPU: energy_j = energy_device_j
GPU_SHARE_PROCESS = "process_utilization"  # split by the job's share of SM utilization (NVML per-process samples)
GPU_SHARE_MIG = "mig"  # a MIG slice: the parent GPU's energy times the slice's fraction of compute slices
GPU_SHARE_DEVICE = "device"  # no share could be told (the reason follows): energy_j = energy_device_j
TAG_DEVICE = "roofline.device"  # train: the resolved device (the param may say "auto")
TAG_COMMAND = "roofline.command"  # measure: the measured command line
TAG_EXIT_CODE = "roofline.exit_code"  # measure: its exit status
TAG_NODE = "roofline.node"  # remote sweep: the node (Ray node id, Slurm node) that measured the run
TAG_EXECUTOR = "roofline.executor"  # remote sweep: ray or slurm
TAG_HEARTBEAT = "roofline.heartbeat"  # remote sweep: epoch seconds of the worker's last heartbeat
EXECUTORS: tuple[str, ...] = ("local", "ray", "slurm")
LAUNCHES: tuple[str, ...] = ("warm", "fresh")
"""How the local executor starts each configuration's job: ranks forked from a server that
imported torch once (warm), or an ``mlflow-roofline train`` process of its own (fresh)."""
SOURCE_IMPORT_PREFIX = "import:"
TAG_IMPORT_ROW_HASH = "roofline.import_row_hash"  # import: hash of the row's content (re-import adds nothing)
TAG_IMPORT_FILE = "roofline.import_file"  # import: the file's name
TAG_IMPORT_ROW = "roofline.import_row"  # import: where in the file (``line N`` or ``row N``)
# Runs measured inside the user's own training loop (Trainer callback, Accelerate hook).
TAG_CONFIG_WARNING = "roofline.config_warning"  # the fields it could not read from the model
TAG_PARAM_CONFLICT = "roofline.param_conflict"  # params the run already held with another value
TAG_FORECAST_PRIOR = "roofline.forecast_prior"  # the law the forecast started from, or why none
TAG_ENERGY_BUDGET_KWH = "roofline.energy_budget_kwh"  # the budget the job was held to
TAG_STOP_REASON = "roofline.stop_reason"  # why it stopped the job before its planned end
# Fit run and registered model versions.
TAG_FORM = "roofline.form"  # the energy-law form registered
TAG_FIT_RUN_ID = "roofline.fit_run_id"  # model version (or a launcher run elsewhere): the fit run that made it
TAG_CV_MAPE = "roofline.cv_mape"  # model version: its cv_mape, in percent
TAG_PARENT_RUN_ID = "mlflow.parentRunId"  # MLflow's own nesting tag
# Sweep runs and the train runs a sweep starts.
TAG_SWEEP_RUN_ID = "roofline.sweep_run_id"  # train run: its sweep; launcher run: the sweep it opened
TAG_LAUNCHER_RUN_ID = "roofline.launcher_run_id"  # sweep or fit run: the `mlflow run` run that started it
TAG_SPEC = "roofline.spec"  # sweep run: where its spec was read from
TAG_SPEC_HASH = "roofline.spec_hash"  # sweep run: hash of the checked spec
TAG_CLAIM = "roofline.claim"  # train run of a sweep that lost the claim of its config: why it never ran
# Which process works for a RUNNING run (how a sweep tells live runs from stale ones).
TAG_HOST = "roofline.host"  # host name of the processes below
TAG_PID = "roofline.pid"  # the process measuring the run (train), or the sweep itself on a sweep run
TAG_PID_START = "roofline.pid_start"  # its start time, epoch seconds (guards against pid reuse)
TAG_SWEEP_PID = "roofline.sweep_pid"  # train run: the sweep process that created it and waits for it
TAG_SWEEP_PID_START = "roofline.sweep_pid_start"  # its start time, epoch seconds

# Sweep-run metrics (step = configurations settled so far).
M_CONFIGS_PLANNED = "configs_planned"
M_CONFIGS_SKIPPED_INVALID = "configs_skipped_invalid"
M_CONFIGS_ALREADY_DONE = "configs_already_done"
M_CONFIGS_FAILED_EARLIER = "configs_failed_earlier"
M_CONFIGS_FINISHED = "configs_finished"
M_CONFIGS_FAILED = "configs_failed"
M_CONFIGS_DONE_ELSEWHERE = "configs_done_elsewhere"  # finished meanwhile by a run this sweep did not start
M_CONFIGS_FAILED_ELSEWHERE = "configs_failed_elsewhere"  # failed meanwhile in a run this sweep did not start
M_CONFIGS_REMAINING = "configs_remaining"

# Where co2e_g came from; TAG_CARBON_UNKNOWN (saying how to give the figure) when it could not be computed.
TAG_CARBON_INTENSITY = "roofline.carbon_intensity_g_per_kwh"
TAG_CARBON_SOURCE = "roofline.carbon_source"  # option, env or table:<region>
TAG_PUE = "roofline.pue"
TAG_PRICE_PER_KWH = "roofline.price_per_kwh"
TAG_CARBON_UNKNOWN = "roofline.carbon_unknown"
# Where embodied_co2e_g and water_l came from (table rows); *_UNKNOWN names the missing figure instead.
TAG_EMBODIED_SOURCE = "roofline.embodied_source"
TAG_WATER_SOURCE = "roofline.water_source"
TAG_EMBODIED_UNKNOWN = "roofline.embodied_unknown"
TAG_WATER_UNKNOWN = "roofline.water_unknown"
TAG_WARMUP_ENERGY_ERROR = "roofline.warmup_energy_error"  # why warmup_energy_j is missing
TAG_ENERGY_NODE_ERROR = "roofline.energy_node_error"  # why energy_cpu_j / _dram_j / _node_j are missing or partial
TAG_METER_CHECK = "roofline.energy_meter_check"  # which meter cross-checked energy_j, or why none could
# System metrics (MLflow's System metrics tab, beside MLflow's own system/...): the cumulative energy of
# the meter's window while it is open, watt-hours, per GPU and for the node's CPU packages and DRAM.
SYSTEM_METRIC_PREFIX = "system/"  # MLflow's: system/<node id>/<name> when MLFLOW_SYSTEM_METRICS_NODE_ID is set
M_SYSTEM_CPU_ENERGY_WH = "system/cpu_energy_wh"  # estimate: the process tree; rapl: the CPU packages
M_SYSTEM_DRAM_ENERGY_WH = "system/dram_energy_wh"  # rapl: the DRAM zones
TAG_SYSTEM_ENERGY_SOURCE = "roofline.system_energy_source"  # the meter the system/..._energy_wh metrics read


def system_gpu_energy_metric(index: int) -> str:
    """``system/gpu_<index>_energy_wh``: one GPU's cumulative energy, watt-hours (``index``: its CUDA ordinal)."""
    return f"{SYSTEM_METRIC_PREFIX}gpu_{index}_energy_wh"


def system_metric_on_node(name: str, node_id: str | None) -> str:
    """``name`` (``system/<rest>``) as MLflow names a node's system metric: ``system/<node_id>/<rest>``."""
    if not node_id:
        return name
    return f"{SYSTEM_METRIC_PREFIX}{node_id}/{name.removeprefix(SYSTEM_METRIC_PREFIX)}"


TAG_NOTE = "mlflow.note.content"  # MLflow's run description, rendered as Markdown by the UI
# Experiment tag: MLflow's kind of an experiment, which picks the UI's view of it.
TAG_EXPERIMENT_KIND = "mlflow.experimentKind"
EXPERIMENT_KIND_MODEL_TRAINING = "custom_model_development"  # the UI's "Model training" view

MAX_TAG_CHARS = 5000
"""Longest tag value this package writes (MLflow refuses or truncates past 8000 characters)."""
MAX_NOTE_CHARS = 8000
"""Longest run description (the tag ``mlflow.note.content``): MLflow's limit on a tag value."""

DEFAULT_EXPERIMENT = "roofline-bert"
DEFAULT_MODEL_NAME = "roofline-energy"
MISSING_BASELINE_CHOICES: tuple[str, ...] = ("law", "drop")  # fit: eta of runs without a single-device run
# Values of TAG_BASELINE: a parallel run's single-device time per sample came from the median
# single run at the same global batch, at the same per-device batch, or the hardware's time law.
BASELINE_MEASURED = "measured"
BASELINE_PER_DEVICE = "per_device"
BASELINE_TIME_LAW = "time_law"
BASELINE_KINDS: tuple[str, ...] = (BASELINE_MEASURED, BASELINE_PER_DEVICE, BASELINE_TIME_LAW)
DEFAULT_ALIAS = "champion"

# Fit-run metrics of the law (fit/metrics.py): the paper's form against the baseline (docs/schema.md).
M_ADJ_R2 = "adj_r2"
M_ADJ_R2_BASELINE = "adj_r2_baseline"
M_RMSE_LOG = "rmse_log"  # in-sample, natural-log units
M_RMSE_LOG_BASELINE = "rmse_log_baseline"
M_RMSE_REDUCTION = "rmse_reduction"  # % by which the paper's rmse_log is below the baseline's
M_ALPHA_C = "alpha_c"
M_ALPHA_M = "alpha_m"
M_ALPHA_ETA = "alpha_eta"
M_LOG_KAPPA = "log_kappa"  # log joules
M_CV_MAPE = "cv_mape"  # %, the registered form's grouped cross-validated error
M_PSI_PREFIX = "psi_"  # psi_<strategy>: the strategy's log-energy offset

# Evaluation-run metrics of a registered law scored on newly measured runs (the `roofline` model
# evaluator, core/drift.py): errors of the predicted energy_j against the measured, in percent.
M_DRIFT_N_ROWS = "drift_n_rows"  # runs scored
M_DRIFT_MAPE = "drift_mape"  # %, mean |predicted - measured| / measured
M_DRIFT_MEDIAN_APE = "drift_median_ape"  # %, its median
M_DRIFT_BIAS = "drift_bias"  # %, median (predicted - measured) / measured: negative when runs now cost more
M_DRIFT_COVERAGE = "drift_interval_coverage"  # %, measured values inside the law's 95 % prediction interval
M_DRIFT_EXTRAPOLATED = "drift_extrapolated_share"  # %, rows outside the fitted ranges
M_DRIFT_REFIT = "drift_refit"  # 1 when the verdict is refit, else 0
TAG_DRIFT_VERDICT = "roofline.drift_verdict"  # ok or refit
TAG_DRIFT_REASON = "roofline.drift_reason"  # the thresholds the scores crossed, or that none was
DRIFT_RESIDUALS_ARTIFACT = "roofline/drift_residuals.png"

# Tags of the `roofline` run context provider (ROOFLINE_RUN_CONTEXT=true): on every run the process
# starts, beside roofline.hardware and the carbon intensity where known.
TAG_DEVICE_COUNT = "roofline.device_count"  # GPUs this process can see (0: a CPU host)
TAG_DRIVER_VERSION = "roofline.driver_version"  # NVIDIA's driver, as NVML reports it
TAG_CUDA_VERSION = "roofline.cuda_driver_version"  # the CUDA version that driver supports, e.g. 12.4
TAG_REGION = "roofline.region"  # the grid region (ROOFLINE_REGION)
# Runs behind a fit run's law.
M_N_RUNS_DROPPED = "n_runs_dropped"  # dropped for this hardware after the pull
M_N_ETA_FROM_LAW = "n_eta_from_law"
M_N_ETA_MEASURED = "n_eta_measured"
# Parallel runs of the fit by the kind of their single-device baseline (BASELINE_KINDS).
M_N_RUNS_BASELINE_MEASURED = "n_runs_baseline_measured"
M_N_RUNS_BASELINE_PER_DEVICE = "n_runs_baseline_per_device"
M_N_RUNS_BASELINE_TIME_LAW = "n_runs_baseline_time_law"
M_N_RUNS_BASELINE: dict[str, str] = {
    BASELINE_MEASURED: M_N_RUNS_BASELINE_MEASURED,
    BASELINE_PER_DEVICE: M_N_RUNS_BASELINE_PER_DEVICE,
    BASELINE_TIME_LAW: M_N_RUNS_BASELINE_TIME_LAW,
}
M_N_WORKLOADS = "n_workloads"
M_CORR_LOG_C_LOG_M = "corr_log_c_log_m"  # collinearity of the two roofline proxies
# Every candidate form's errors: <prefix><form>.
M_CV_MAPE_FORM_PREFIX = "cv_mape_"
M_CV_MAPE_SE_FORM_PREFIX = "cv_mape_se_"
M_ADJ_R2_FORM_PREFIX = "adj_r2_"
M_RMSE_LOG_FORM_PREFIX = "rmse_log_"
M_CV_MAPE_POOLED_PREFIX = "cv_mape_pooled_"  # pooled fit over all hardware
M_CV_MAPE_SE_POOLED_PREFIX = "cv_mape_se_pooled_"
M_POOLED_REGISTERED = "pooled_registered"  # 1.0 when a pooled form (not separate slopes) won the comparison
# The additive roofline decomposition and the time law.
M_EPS_COMP = "eps_comp_j_per_flop"
M_EPS_MEM = "eps_mem_j_per_element"
M_E0_J = "e0_j"
M_ROOFLINE_MAPE = "roofline_mape"
M_TIME_BETA_C = "time_beta_c"
M_TIME_BETA_M = "time_beta_m"
M_TIME_LOG_TAU = "time_log_tau"
M_TIME_ADJ_R2 = "time_adj_r2"
M_TIME_PER_WORK = "time_per_work"  # 1.0 when the chosen time law is per unit of work
M_TIME_CV_MAPE = "time_cv_mape"
# The speedup law of each strategy: speedup_<strategy>_<param>, _rmse, _n_points.
M_SPEEDUP_PREFIX = "speedup_"


def form_metric(prefix: str, form: str) -> str:
    """The metric ``<prefix><form>`` of one candidate form (``cv_mape_paper``), one strategy (``psi_ddp``)."""
    return f"{prefix}{form}"


def speedup_metric(strategy: str, key: str) -> str:
    """The speedup-law metric ``speedup_<strategy>_<key>`` (a law parameter, ``rmse`` or ``n_points``)."""
    return f"{M_SPEEDUP_PREFIX}{strategy}_{key}"


def speedup_score_metric(score: str, strategy: str, form: str) -> str:
    """The speedup-law score ``speedup_<score>_<strategy>_<form>`` (``cv_mape`` or ``extrap_mape``, %)."""
    return f"{M_SPEEDUP_PREFIX}{score}_{strategy}_{form}"


# Fit-run metrics of the size-extrapolation check (percent): the registered form's error
# on the held-out larger models, and each form's as ``extrap_mape_<form>`` / ``extrap_mape_se_<form>``.
M_EXTRAP_MAPE = "extrap_mape"
M_EXTRAP_MAPE_FORM_PREFIX = "extrap_mape_"
M_EXTRAP_MAPE_SE_FORM_PREFIX = "extrap_mape_se_"
M_EXTRAP_HELD_OUT = "extrap_n_held_out"  # runs held out (larger models)
M_EXTRAP_SIZE_BOUND = "extrap_size_bound"  # the L*d^2 the check fitted up to
# Where the runs mix kinds (fit/forms/proxy_comparison.py): the best grouped-CV MAPE (%) of the forms in
# the paper's proxies and in the complete ones, and 1.0 when the paper's would have done as well.
M_CV_MAPE_PAPER_PROXIES = "cv_mape_paper_proxies"
M_CV_MAPE_COMPLETE_PROXIES = "cv_mape_complete_proxies"
M_PAPER_PROXIES_SUFFICE = "paper_proxies_suffice"
M_REPEAT_SPREAD = "repeat_spread_pct"  # median relative std (%) of energy across repeats of one config: the noise floor
M_REPEATED_CONFIGS = "n_repeated_configs"  # configurations measured more than once
M_LOHO_MAPE = "loho_mape"  # leave-one-hardware-out MAPE (%) of the pooled covariate form
M_LOHO_MAPE_FORM_PREFIX = "loho_mape_"  # loho_mape_<form>, and its standard error loho_mape_se_<form>
M_LOHO_MAPE_SE_FORM_PREFIX = "loho_mape_se_"
# Leave-one-GPU-out MAPE (%) of single-device time on a GPU no run measured (fit/pooled_time.py), per way of
# timing it: ``time_loho_mape_pooled`` (the pooled roofline in time), ``time_loho_mape_scaled`` (the reference's law
# scaled by the roofline).
M_TIME_LOHO_MAPE_PREFIX = "time_loho_mape_"
# Parent fit-run metrics of the pooled forms (fit/pooled.py), per form ``<prefix><form>``, percent;
# the parent's ``extrap_mape``, ``extrap_n_held_out`` and ``extrap_size_bound`` are the pooled check's.
M_EXTRAP_MAPE_POOLED_PREFIX = "extrap_mape_pooled_"
M_EXTRAP_MAPE_SE_POOLED_PREFIX = "extrap_mape_se_pooled_"
M_POOLED_SANE_PREFIX = "pooled_sane_"  # 1 when the form passes the sanity checks on every hardware, else 0
# Parent fit-run metrics of the fleet model (fit/fleet_fit.py), per measured hardware ``<prefix><hardware slug>``:
# its route (1: its own law answers it, 0: the pooled law) and both laws' MAPE (%) on its held-out bigger models.
M_ROUTE_PREFIX = "route_"
M_ROUTE_OWN_MAPE_PREFIX = "route_own_mape_"
M_ROUTE_POOLED_MAPE_PREFIX = "route_pooled_mape_"
# 1 when the fleet model answers a GPU of the hardware table no run measured (0: refused, the tag says why)
M_FLEET_ANSWERS_UNMEASURED = "fleet_answers_unmeasured"
TAG_FLEET_UNMEASURED_REFUSAL = "roofline.fleet_unmeasured_refusal"  # why such a GPU is refused (when it is)

# Fit-run params and counts beside the law's own metrics (fit/metrics.py).
# (not P_-prefixed: these words are also the fit's frame columns, which are not logged names)
FIT_PARAM_HARDWARE = "hardware"  # fit run: the hardware its law is for
FIT_PARAM_FORM = "form"  # fit run: the registered form
FIT_PARAM_FORMULA = "formula"  # fit run: the registered form's formula
M_N_RUNS = "n_runs"  # fit run: runs the law was fitted on
M_N_HARDWARE = "n_hardware"  # parent fit run: hardware fitted
M_N_HARDWARE_SKIPPED = "n_hardware_skipped"  # parent fit run: hardware that could not be fitted
M_N_RUNS_FOUND = "n_runs_found"  # fit run: finished train runs the pull found
M_N_RUNS_DROPPED_PULL = "n_runs_dropped_pull"  # fit run: runs the pull left out (reasons in the report)
