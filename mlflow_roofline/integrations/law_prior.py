"""The registered energy law's prediction for the running job: the forecast's prior.

``models:/roofline-energy@champion`` by default (what ``fit`` registers). A default
that is not registered is no error: the forecast then comes from the measured steps
alone, and the run's ``roofline.forecast_prior`` tag says so. A law that cannot be
loaded or cannot predict this configuration is reported the same way, never raised into
the user's training loop.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.schema import DEFAULT_ALIAS, DEFAULT_MODEL_NAME
from mlflow_roofline.integrations.forecast import Prior

logger = logging.getLogger(__name__)

DEFAULT_LAW_URI = f"models:/{DEFAULT_MODEL_NAME}@{DEFAULT_ALIAS}"
LAW_INPUTS: tuple[str, ...] = (
    "num_layers",
    "hidden_size",
    "num_heads",
    "ffn_size",
    "seq_len",
    "batch_size",
    "num_steps",
    "strategy",
    "num_devices",
)


def law_prior(model_uri: str | None, config: TrainConfig, hardware: str) -> tuple[Prior | None, str]:
    """The law's prediction for ``config`` (``num_steps`` = the planned window) and a note on it.

    Returns ``(None, why)`` when there is no usable law: no URI, nothing registered under
    it, a load or prediction failure, or a prediction that is not a positive interval.
    """
    if not model_uri:
        return None, "none: no model_uri"
    alias = re.fullmatch(r"models:/([^@/]+)@([^@/]+)", model_uri)
    if alias:
        from mlflow import MlflowClient
        from mlflow.exceptions import MlflowException

        try:
            version = MlflowClient().get_model_version_by_alias(alias.group(1), alias.group(2))
        except MlflowException:
            return None, f"none: nothing registered as {model_uri}"
        label = f"{model_uri} (version {version.version})"
    else:
        label = model_uri
    try:
        prediction = _predict(model_uri, config, hardware)
    except Exception as exc:  # noqa: BLE001  the user's job goes on without a prior; the tag says why
        logger.warning("roofline: the law %s could not predict this job (%s); forecasting from the steps alone",
                       model_uri, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return None, f"none: {label} failed: {str(exc)[:200]}"
    energy, lower, upper = (float(prediction[k]) for k in ("energy_j", "energy_j_lower", "energy_j_upper"))
    if not (0 < lower <= energy <= upper):
        return None, f"none: {label} predicted no positive interval ({lower:.3g}, {energy:.3g}, {upper:.3g})"
    return Prior(energy, lower, upper, label), label


def _predict(model_uri: str, config: TrainConfig, hardware: str) -> Any:
    import mlflow
    import pandas as pd

    model = mlflow.pyfunc.load_model(model_uri)
    params = config.to_params()
    row: dict[str, Any] = {k: (params[k] if k == "strategy" else int(params[k])) for k in LAW_INPUTS}
    schema = model.metadata.get_input_schema()
    if schema is not None and "hardware" in schema.input_names():
        row["hardware"] = hardware
    return model.predict(pd.DataFrame([row])).iloc[0]
