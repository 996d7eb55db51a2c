"""The registered energy law's prediction for the running job: the forecast's prior.

``models:/roofline-energy@champion`` by default (what ``fit`` registers). A default
that is not registered is no error: the forecast then comes from the measured steps
alone, and the run's ``roofline.forecast_prior`` tag says so. A law that cannot be
loaded or cannot predict this configuration is reported the same way, never raised into
the user's training loop. The lookup and the load run in a background thread from the
start of training (:class:`LawLoader`); the K-th step only predicts. They run once per
process for a store and a URI: the next ``train()`` of a notebook or a sweep script reuses
the loaded law (or the answer that there is none) without reading the registry again, so a
law registered later in the same process is not seen by its jobs.
"""

from __future__ import annotations

import concurrent.futures
import logging
import re
import threading
from typing import TYPE_CHECKING

import pandas as pd

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.schema import LAW_INPUT_NAMES, M_ENERGY_J
from mlflow_roofline.integrations.forecast import Prior
from mlflow_roofline.tracking.client import TrackingClient, current_tracking_uri

if TYPE_CHECKING:  # the loaded model's type only: mlflow.pyfunc is heavy, imported when a law is loaded
    from mlflow_roofline.tracking.client import PyFuncModel

logger = logging.getLogger(__name__)

LAW_INPUTS: tuple[str, ...] = LAW_INPUT_NAMES

LoadedLaw = tuple["PyFuncModel | None", str]
"""What :func:`load_law` returns: the model (None: none) and its label, or why there is none."""

_loads: dict[tuple[str, str | None], concurrent.futures.Future[LoadedLaw]] = {}
_loads_lock = threading.Lock()


class LawLoader:
    """Looks the law up and loads it in a background thread from the start of training, so the
    training loop does not wait for the registry; :meth:`prior` predicts the job once it is known."""

    def __init__(self, model_uri: str | None) -> None:
        self.model_uri = model_uri
        self._loaded = load_once(model_uri)

    def prior(self, config: TrainConfig | None, hardware: str, why_no_config: str = "") -> tuple[Prior | None, str]:
        """The law's prediction for ``config`` (waits for the load), or None and why."""
        model, label = self._loaded.result()
        if model is None:
            return None, label
        if config is None:
            return None, f"none: {why_no_config}"
        return predict_prior(model, label, config, hardware)


def load_once(model_uri: str | None) -> concurrent.futures.Future[LoadedLaw]:
    """:func:`load_law` of ``model_uri`` from the current store, started in a background thread
    the first time this process asks for it; later calls get the same (perhaps finished) load."""
    uri = current_tracking_uri()
    with _loads_lock:
        loaded = _loads.get((uri, model_uri))
        if loaded is None:
            pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="roofline-law")
            loaded = _loads[(uri, model_uri)] = pool.submit(load_law, model_uri, uri)
            pool.shutdown(wait=False)
    return loaded


def load_law(model_uri: str | None, tracking_uri: str | None = None) -> LoadedLaw:
    """The pyfunc model and its label (``URI (version N)``), or None and why there is none, from the
    store at ``tracking_uri`` (None: MLflow's current one)."""
    if not model_uri:
        return None, "none: no model_uri"
    alias = re.fullmatch(r"models:/([^@/]+)@([^@/]+)", model_uri)
    label = model_uri
    try:
        client = TrackingClient(tracking_uri)
        if alias:
            version = client.version_by_alias(alias.group(1), alias.group(2))
            if version is None:
                return None, f"none: nothing registered as {model_uri}"
            label = f"{model_uri} (version {version.version})"
        return client.load_model(model_uri), label
    except Exception as exc:
        logger.warning(
            "roofline: the law %s could not be loaded (%s); forecasting from the steps alone",
            model_uri,
            _first_line(exc),
        )
        return None, f"none: {label} failed to load: {_first_line(exc)[:200]}"


def predict_prior(model: PyFuncModel, label: str, config: TrainConfig, hardware: str) -> tuple[Prior | None, str]:
    """The law's prediction for ``config`` (``num_steps`` = the planned window) as a prior.

    Returns ``(None, why)`` on a prediction failure or a prediction that is not a positive interval.
    """
    try:
        prediction = _predict(model, config, hardware)
    except Exception as exc:
        logger.warning(
            "roofline: the law %s could not predict this job (%s); forecasting from the steps alone",
            label,
            _first_line(exc),
        )
        return None, f"none: {label} failed: {_first_line(exc)[:200]}"
    energy, lower, upper = (float(prediction[k]) for k in (M_ENERGY_J, "energy_j_lower", "energy_j_upper"))
    if not (0 < lower <= energy <= upper):
        return None, f"none: {label} predicted no positive interval ({lower:.3g}, {energy:.3g}, {upper:.3g})"
    return Prior(energy, lower, upper, label), label


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0] if text else type(exc).__name__


def _predict(model: PyFuncModel, config: TrainConfig, hardware: str) -> pd.Series:
    params = config.to_params()
    row: dict[str, str | int] = {k: (params[k] if k == "strategy" else int(params[k])) for k in LAW_INPUTS}
    schema = model.metadata.get_input_schema()
    if schema is not None and "hardware" in schema.input_names():
        row["hardware"] = hardware
    return pd.DataFrame(model.predict(pd.DataFrame([row]))).iloc[0]
