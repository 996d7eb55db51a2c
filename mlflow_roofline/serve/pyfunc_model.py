"""The fitted law as an MLflow pyfunc model: logged by ``fit``, served by ``mlflow models serve``.

The model's only artifact is the :class:`~mlflow_roofline.law.fitted.FittedLaw` as JSON
(coefficients, covariance, residual variance, speedup laws, hardware, fitted ranges), or the
:class:`~mlflow_roofline.law.fleet.FleetLaw` of a fit over several GPUs (each GPU's law, the
pooled law, the routes), whose rows :mod:`~mlflow_roofline.serve.fleet_routing` answers.
Nothing is pickled: the model is logged "from code" (:mod:`mlflow_roofline.serve.pyfunc_entry`
builds a :class:`RooflineEnergyModel` when MLflow loads it). Answers are those of
:mod:`~mlflow_roofline.serve.predict` and :mod:`~mlflow_roofline.serve.placement_search`.

Inference params (declared in the signature, so the scoring server accepts them):

- ``mode``: ``predict`` (default), ``recommend`` or ``pareto``;
- ``max_devices``: largest device count recommend and pareto mode consider (default 8);
- ``objective``: what recommend mode minimises: ``energy`` (default), ``time``, ``edp``
  (energy x time), ``carbon`` (g CO2e) or ``cost``;
- ``carbon_intensity`` (g CO2e/kWh), ``region`` (ISO country code or cloud region),
  ``pue``, ``price_per_kwh``: add ``co2e_g`` (with interval) and ``cost`` to the output
  (see :mod:`mlflow_roofline.serve.params` for the order they are resolved in).

Any other param is refused with a 400 naming it and the params there are. MLflow itself
would drop it with a warning (``_enforce_params_schema`` in ``mlflow/models/utils.py``,
called by ``PyFuncModel._predict`` before the model runs), so the model reads the params
the caller passed to ``PyFuncModel.predict`` (:func:`sent_params`).

The model carries the serve-time part of this package as MLflow ``code_paths``
(:func:`copy_serving_code`), and its requirements name only mlflow, numpy, pandas and
scipy: it loads in an environment built from its ``requirements.txt`` alone (``mlflow
models serve`` with any env manager, ``mlflow models generate-dockerfile``, a scoring
container). The package is on no public index, so the model carries the part of it that
loading and predicting import: the package's ``__init__`` and the ``core``, ``law`` and
``serve`` subpackages (plus packaged data files), which import nothing beyond mlflow,
numpy, pandas and scipy. Training, sweeping and fitting code (torch, statsmodels) stays out.

This module, :mod:`~mlflow_roofline.serve.pyfunc_entry` and :mod:`~mlflow_roofline.serve.errors`
are the only ones outside ``tracking`` that import MLflow: the pyfunc class, its logging and
loading (:func:`load_law_model`, for the ``predict`` command) need MLflow's model API, which
the tracking client does not wrap.
"""

from __future__ import annotations

import inspect
import logging
import shutil
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mlflow
import numpy
import pandas as pd
import scipy
from mlflow.exceptions import MlflowException
from mlflow.models import ModelSignature
from mlflow.models.model import ModelInfo
from mlflow.protos.databricks_pb2 import INTERNAL_ERROR
from mlflow.pyfunc import PyFuncModel, PythonModel, PythonModelContext
from mlflow.types import ColSpec, DataType, ParamSchema, ParamSpec, Schema
from mlflow.types.schema import AnyType, TensorSpec

from mlflow_roofline import __version__
from mlflow_roofline.core.errors import RooflineError
from mlflow_roofline.core.gpu_datasheets import load_hardware_table
from mlflow_roofline.core.job_table import JOB_COLUMNS
from mlflow_roofline.core.schema import HARDWARE_COLUMN, M_CV_MAPE, M_N_RUNS
from mlflow_roofline.law.fitted import FittedLaw
from mlflow_roofline.law.fleet import FleetLaw, law_from_json
from mlflow_roofline.serve.emissions import EMISSION_COLUMNS
from mlflow_roofline.serve.errors import invalid
from mlflow_roofline.serve.fleet_routing import LAW_COLUMN, fleet_frame
from mlflow_roofline.serve.footprint_columns import FOOTPRINT_COLUMNS, TEXT_COLUMNS
from mlflow_roofline.serve.params import (
    DEFAULT_MAX_DEVICES,
    DEFAULT_MODE,
    DEFAULT_OBJECTIVE,
    read_request,
    refuse_unknown,
)
from mlflow_roofline.serve.placement_search import (
    PARETO_OUTPUT_COLUMNS,
    RECOMMEND_OUTPUT_COLUMNS,
    pareto_frame,
    recommend_frame,
)
from mlflow_roofline.serve.predict import PREDICT_OUTPUT_COLUMNS, predict_frame
from mlflow_roofline.serve.scoring_guard import install as guard_scoring_server
from mlflow_roofline.serve.validate import SPEEDUP_COLUMN

LAW_ARTIFACT = "law"
LAW_FILE = "fitted_law.json"

SERVE_TIME_PARTS: tuple[str, ...] = ("__init__.py", "pyfunc_model.py", "core", "law", "serve", "data")
"""What loading a law model imports, relative to the package root (missing parts are skipped)."""

EXAMPLE_QUERY: dict[str, int | str] = {
    "num_layers": 12,
    "hidden_size": 768,
    "num_heads": 12,
    "ffn_size": 3072,
    "seq_len": 128,
    "batch_size": 32,
    "num_steps": 1000,
    "strategy": "fsdp",
    "num_devices": 4,
}
"""The docs/schema.md query: BERT-base, 1000 steps of batch 32, FSDP on 4 devices."""

_LOGGER = logging.getLogger(__name__)

_PYFUNC_PREDICT = inspect.unwrap(PyFuncModel.predict).__code__
"""The code of ``PyFuncModel.predict(data, params)``: every caller's door to a loaded model."""


def sent_params(model: PythonModel, received: Mapping[str, object] | None) -> Mapping[Any, object] | None:
    """The params the caller passed for ``model``, before MLflow dropped the ones it does not declare.

    ``PyFuncModel.predict(data, params)`` is where the scoring server (``mlflow models
    serve``), ``mlflow.pyfunc.load_model(...).predict`` and the ``predict`` command all hand
    over a request's params; ``PyFuncModel._predict`` then runs MLflow's
    ``_enforce_params_schema`` (``mlflow/models/utils.py``), which drops an unknown param
    with a warning and fills in the defaults, and only that reaches ``model.predict``.
    MLflow offers no hook or setting to refuse instead, so this reads the ``params``
    argument of the nearest ``PyFuncModel.predict`` call on this thread's stack whose
    loaded model is ``model``. Where there is none (the model called directly, or a
    caller that bypasses ``PyFuncModel.predict``), ``received`` is what was sent.
    """
    frame = inspect.currentframe()
    try:
        while frame is not None:
            if frame.f_code is _PYFUNC_PREDICT:
                caller = frame.f_locals.get("self")
                impl = getattr(caller, "_model_impl", None)
                if getattr(impl, "python_model", None) is model:
                    sent = frame.f_locals.get("params")
                    return sent if sent is None or isinstance(sent, Mapping) else received
            frame = frame.f_back
        return received
    finally:
        del frame  # a frame held in a local keeps the stack alive (reference cycle)


ServedLaw = FittedLaw | FleetLaw
"""What a law model serves: one law (of one GPU, or pooled over several), or a fleet law routing rows to laws."""


def input_example(law: ServedLaw) -> pd.DataFrame:
    """The docs/schema.md query, moved to a strategy the law knows when it was not fitted on fsdp."""
    query: dict[str, object] = dict(EXAMPLE_QUERY)
    if len(law.known_hardware) > 1:
        query[HARDWARE_COLUMN] = law.known_hardware[0]
    if query["strategy"] not in law.strategies:
        parallel = [s for s in law.strategies if s != "single"]
        query["strategy"] = parallel[0] if parallel else "single"
        query["num_devices"] = 4 if parallel else 1
    return pd.DataFrame([query])


def model_signature() -> ModelSignature:
    """Inputs (docs/schema.md), outputs of both modes, and the inference params with defaults.

    ``strategy`` and ``num_devices`` are optional in the schema because recommend mode
    ignores them; predict mode reports their absence by name. ``speedup`` is optional;
    ``hardware`` too, except for a law pooled over several hardware (:mod:`serve.hardware_routing`).
    The job's columns are the job table's request columns (:mod:`mlflow_roofline.core.job_table`): the
    sizes required, the kind columns (``precision``, ``arch``, ``vocab_size``, ...) optional, with the
    defaults of runs logged before they existed (:mod:`serve.job_kind`).
    The numeric inputs are typed ``AnyType()``: MLflow would cast them to the declared type
    before the model sees them (2.9 layers to 2, ``true`` to 1), so the model receives the
    numbers as sent and checks them itself (:mod:`mlflow_roofline.serve.validate`).
    """
    # The job table's request columns: text as text; the numbers and the flags AnyType, checked by the model as sent.
    columns: list[ColSpec | TensorSpec] = [
        ColSpec(DataType.string if entry.type == "text" else AnyType(), entry.name, required=entry.group == "size")
        for entry in JOB_COLUMNS
        if entry.request
    ]
    columns += [
        ColSpec(AnyType(), SPEEDUP_COLUMN, required=False),
        ColSpec(DataType.string, HARDWARE_COLUMN, required=False),
    ]
    inputs = Schema(columns)
    output_types = {
        "strategy": DataType.string,
        "objective": DataType.string,
        "energy_optimal_strategy": DataType.string,
        "time_optimal_strategy": DataType.string,
        "extrapolated": DataType.boolean,
        "speedup_implausible": DataType.boolean,
        "extrapolated_hardware": DataType.boolean,
        "time_scaled_from": DataType.string,
        LAW_COLUMN: DataType.string,
        "num_devices": DataType.long,
        "candidates": DataType.long,
        "energy_optimal_num_devices": DataType.long,
        "time_optimal_num_devices": DataType.long,
        "energy_optimal_extrapolated": DataType.boolean,
        "time_optimal_extrapolated": DataType.boolean,
        "row": DataType.long,
    }
    output_types.update(dict.fromkeys(TEXT_COLUMNS, DataType.string))
    names = dict.fromkeys(
        RECOMMEND_OUTPUT_COLUMNS + PARETO_OUTPUT_COLUMNS + EMISSION_COLUMNS + FOOTPRINT_COLUMNS + (LAW_COLUMN,)
    )
    outputs = Schema(
        [
            ColSpec(output_types.get(name, DataType.double), name, required=name in PREDICT_OUTPUT_COLUMNS)
            for name in names
        ]
    )
    params = ParamSchema(
        [
            ParamSpec("mode", DataType.string, DEFAULT_MODE),
            ParamSpec("max_devices", DataType.long, DEFAULT_MAX_DEVICES),
            ParamSpec("objective", DataType.string, DEFAULT_OBJECTIVE),
            ParamSpec("carbon_intensity", DataType.double, None),
            ParamSpec("region", DataType.string, None),
            ParamSpec("pue", DataType.double, None),
            ParamSpec("price_per_kwh", DataType.double, None),
        ]
    )
    return ModelSignature(inputs=inputs, outputs=outputs, params=params)


def text_inputs() -> list[str]:
    """The inputs the signature types as text (a CSV cell of any other input is read as a number)."""
    inputs = model_signature().inputs
    assert inputs is not None  # model_signature declares them
    return [str(spec.name) for spec in inputs.inputs if isinstance(spec, ColSpec) and spec.type == DataType.string]


class RooflineEnergyModel(PythonModel):
    """Predicts fine-tuning energy (joules) and time (seconds), or recommends a strategy."""

    def __init__(self) -> None:
        self.law: ServedLaw | None = None

    def load_context(self, context: PythonModelContext) -> None:
        """Read the law from the model's JSON artifact, and check the hardware table it will read.

        Loaded by MLflow's scoring server, the model also guards what that server answers
        (:mod:`~mlflow_roofline.serve.scoring_guard`: CSV bodies read as JSON ones, no stack trace).

        A user table (``ROOFLINE_HARDWARE_TABLE``) that breaks a rule of
        :mod:`~mlflow_roofline.core.gpu_datasheets` (a number outside a real device's range,
        a missing column) stops the model from loading, so the server refuses to start
        rather than answering every request with the table's error.

        Raises:
            ConfigError: the hardware table is unreadable or breaks a rule, naming the cell.
        """
        load_hardware_table()
        self.law = law_from_json(Path(context.artifacts[LAW_ARTIFACT]).read_text())
        guard_scoring_server(text_inputs())

    def predict(
        self, context: PythonModelContext, model_input: pd.DataFrame, params: Mapping[str, object] | None = None
    ) -> pd.DataFrame:
        """One output row per input row (pareto mode: per frontier point); columns in the mode's module.

        Raises:
            MlflowException: INVALID_PARAMETER_VALUE (HTTP 400) naming the bad field or param;
                INTERNAL_ERROR (HTTP 500) for a failure of the model itself, one line naming
                the exception type, never a stack trace or a server path (the traceback goes
                to the server's log).
        """
        try:
            return self._answer(context, model_input, params)
        except MlflowException:
            raise
        except Exception as exc:  # the model's own failure: the client gets one line, the log the rest
            _LOGGER.exception("the roofline model failed on a request")
            raise MlflowException(
                f"the energy model failed on this request ({type(exc).__name__}); the server log has the details",
                error_code=INTERNAL_ERROR,
            ) from None

    def _answer(
        self, context: PythonModelContext, model_input: pd.DataFrame, params: Mapping[str, object] | None
    ) -> pd.DataFrame:
        if self.law is None:
            self.load_context(context)
        law = self.law
        assert law is not None  # load_context sets it
        sent = sent_params(self, params)
        if sent is not params and sent:
            refuse_unknown(sent, accepted=list(params or {}))  # MLflow filled in every param of the signature
        request = read_request(params)
        if isinstance(model_input, (dict, list)):
            model_input = pd.DataFrame(model_input)
        if not isinstance(model_input, pd.DataFrame):
            raise invalid("model_input", f"must be a table of rows, got {type(model_input).__name__}")
        frame = model_input

        def answer(one: FittedLaw, rows: pd.DataFrame) -> pd.DataFrame:
            if request.mode == "recommend":
                return recommend_frame(one, rows, request.max_devices, request.objective, request.carbon)
            if request.mode == "pareto":
                return pareto_frame(one, rows, request.max_devices, request.carbon)
            return predict_frame(one, rows, request.carbon)

        return fleet_frame(law, frame, answer) if isinstance(law, FleetLaw) else answer(law, frame)


def pip_requirements() -> list[str]:
    """What loading the model needs; pinned to the versions it was logged with."""
    return [
        f"mlflow=={mlflow.__version__}",
        f"numpy=={numpy.__version__}",
        f"pandas=={pd.__version__}",
        f"scipy=={scipy.__version__}",
    ]


def copy_serving_code(destination: Path) -> Path:
    """Copy the serve-time part of the package to ``destination/mlflow_roofline``; return that folder."""
    source = Path(__file__).resolve().parents[1]  # the package root
    target = destination / "mlflow_roofline"
    target.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in SERVE_TIME_PARTS:
        path = source / part
        if path.is_dir():
            shutil.copytree(path, target / part, ignore=ignore)
        elif path.is_file():
            shutil.copy2(path, target / part)
    return target


def log_law_model(law: ServedLaw, name: str = "model") -> ModelInfo:
    """Log ``law`` as a pyfunc model into the active run.

    The artifact is the law's JSON; the signature declares the inputs, outputs and the
    ``mode``/``max_devices``/``objective`` params; the input example is the docs/schema.md
    query. The law's hardware, energy source, form, runs and cv_mape go into the
    MLmodel metadata. Register the returned ``model_uri`` to serve it by name.
    """
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        # MLflow infers a schema from the input example to check it, and hints that integer columns cannot hold
        # missing values; the model's signature is declared (model_signature), not that inferred one
        warnings.filterwarnings("ignore", message="Hint: Inferred schema contains integer column", category=UserWarning)
        path = Path(tmp) / LAW_FILE
        path.write_text(law.to_json())
        code = copy_serving_code(Path(tmp) / "code")
        return mlflow.pyfunc.log_model(
            name=name,
            python_model=str(Path(__file__).with_name("pyfunc_entry.py")),
            artifacts={LAW_ARTIFACT: str(path)},
            code_paths=[str(code)],
            signature=model_signature(),
            input_example=input_example(law),
            pip_requirements=pip_requirements(),
            metadata={
                "hardware": law.hardware,
                "energy_source": law.energy_source,
                "form": law.form,
                M_N_RUNS: law.n_runs,
                M_CV_MAPE: law.cv_mape,
                "strategies": law.strategies,
                "mlflow_roofline_version": __version__,
            },
        )


class LoadedLawModel:
    """A logged law model loaded back through MLflow (any model URI): its answers and its metadata.

    MLflow's errors become :class:`~mlflow_roofline.core.errors.RooflineError` carrying
    MLflow's message (an :class:`~mlflow_roofline.serve.errors.InputError` says field and rule).
    """

    def __init__(self, model_uri: str) -> None:
        """Load ``model_uri``.

        Raises:
            RooflineError: the model cannot be loaded (``cannot load model <uri>: <why>``).
        """
        try:
            self._model = mlflow.pyfunc.load_model(model_uri)
        except MlflowException as exc:
            raise RooflineError(f"cannot load model {model_uri}: {exc.message}") from exc

    @property
    def metadata(self) -> Mapping[str, object]:
        """The MLmodel metadata :func:`log_law_model` wrote (hardware, energy source, form...)."""
        return self._model.metadata.metadata or {}

    def predict(self, frame: pd.DataFrame, params: Mapping[str, object]) -> pd.DataFrame:
        """The model's answer to ``frame`` under the request ``params``.

        Raises:
            RooflineError: the model refused the request (its message).
        """
        try:
            return self._model.predict(frame, params=dict(params))
        except MlflowException as exc:
            raise RooflineError(exc.message) from exc


def load_law_model(model_uri: str) -> LoadedLawModel:
    """The law model at ``model_uri`` (``models:/name@alias``, ``runs:/...``, a path), ready to ask."""
    return LoadedLawModel(model_uri)
