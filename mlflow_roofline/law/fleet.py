"""The fleet law: the one model a fit over several GPUs registers as ``@champion``.

It holds each measured GPU's own :class:`~law.fitted.FittedLaw` and the pooled law over them
(None where no pooled form passed the sanity checks), and a route per measured GPU: ``own``
or ``pooled``, whichever predicted that GPU's held-out bigger models better (the fit's
size-extrapolation check, :mod:`fit.fleet_routes`), with both errors. A GPU of the hardware
table no run measured is answered by the pooled law's covariate form; where there is none,
:attr:`FleetLaw.unmeasured_refusal` says why. Serving it row by row is
:mod:`serve.fleet_routing`.

Read back from JSON like the :class:`FittedLaw` (``kind: fleet`` tells them apart,
:func:`law_from_json`). The pooled law's per-GPU laws are the fleet's own, written once.
"""

from __future__ import annotations

import dataclasses
import json

from mlflow_roofline.core.errors import LawFileError
from mlflow_roofline.law.coefficients import JsonObject
from mlflow_roofline.law.fitted import HARDWARE_ORDER, LAW_SCHEMA_VERSION, FittedLaw, in_fitted_order

FLEET_KIND = "fleet"
OWN, POOLED = "own", "pooled"
ROUTES: tuple[str, ...] = (OWN, POOLED)
"""What answers a measured GPU: its own law, or the pooled law."""


@dataclasses.dataclass(frozen=True)
class FleetRoute:
    """How one measured GPU is answered, and the evidence.

    Attributes:
        law: ``own`` or ``pooled``.
        own_mape: energy MAPE (%) of the GPU's own law on its held-out bigger models (NaN: not checked).
        pooled_mape: the pooled law's, refitted without those runs (NaN: no pooled law, or not checked).
    """

    law: str
    own_mape: float
    pooled_mape: float

    def to_dict(self) -> dict[str, object]:
        return {"law": self.law, "own_mape": self.own_mape, "pooled_mape": self.pooled_mape}

    @classmethod
    def from_dict(cls, data: JsonObject) -> FleetRoute:
        law = str(data["law"])
        if law not in ROUTES:
            raise ValueError(f"route {law!r} is not one of {', '.join(ROUTES)}")
        return cls(law, float(data["own_mape"]), float(data["pooled_mape"]))


@dataclasses.dataclass(frozen=True)
class FleetLaw:
    """Every measured GPU's law, the pooled law and the route of each GPU (see the module docstring).

    Attributes:
        hardware_laws: each measured GPU's own law, the GPU with the most runs first.
        routes: per measured GPU, which law answers it.
        pooled: the pooled law over the measured GPUs (None where no pooled form was sane).
        unmeasured_refusal: why a GPU no run measured is refused ("" where the pooled law answers it).
    """

    hardware_laws: dict[str, FittedLaw]
    routes: dict[str, FleetRoute]
    pooled: FittedLaw | None = None
    unmeasured_refusal: str = ""
    schema_version: int = LAW_SCHEMA_VERSION
    kind: str = FLEET_KIND

    @property
    def known_hardware(self) -> list[str]:
        """The measured GPUs, the most runs first."""
        return list(self.hardware_laws)

    @property
    def hardware(self) -> str:
        return ", ".join(self.hardware_laws)

    @property
    def energy_source(self) -> str:
        return "+".join(sorted({s for law in self.hardware_laws.values() for s in law.energy_source.split("+")}))

    @property
    def form(self) -> str:
        return FLEET_KIND

    @property
    def n_runs(self) -> int:
        """Runs of every measured GPU."""
        return sum(law.n_runs for law in self.hardware_laws.values())

    @property
    def cv_mape(self) -> float:
        """Grouped-CV MAPE (%) of the law answering each measured GPU, weighted by that GPU's runs."""
        weighted = sum(self.answering(name).cv_mape * law.n_runs for name, law in self.hardware_laws.items())
        return weighted / max(1, self.n_runs)

    @property
    def strategies(self) -> list[str]:
        """Strategies every measured GPU's law can predict."""
        return sorted(set.intersection(*(set(law.strategies) for law in self.hardware_laws.values())))

    @property
    def answers_unmeasured(self) -> bool:
        """Whether a GPU of the hardware table no run measured is answered (by the pooled covariate form)."""
        return self.pooled is not None and self.pooled.covariate_law is not None

    def answering(self, hardware: str) -> FittedLaw:
        """The law that answers a measured GPU: its own, or the pooled law where its route says so."""
        if self.routes[hardware].law == POOLED and self.pooled is not None:
            return self.pooled
        return self.hardware_laws[hardware]

    def label(self, hardware: str) -> str:
        """What the output column ``law`` says answered ``hardware``: its name, or ``pooled``."""
        if hardware in self.hardware_laws and self.answering(hardware) is self.hardware_laws[hardware]:
            return hardware
        return POOLED

    def to_data(self) -> dict[str, object]:
        """JSON-ready data; the pooled law without its per-GPU laws (they are :attr:`hardware_laws`)."""
        pooled = dataclasses.replace(self.pooled, hardware_laws={}).to_data() if self.pooled is not None else None
        return {
            "kind": self.kind,
            "schema_version": self.schema_version,
            "hardware_laws": {name: law.to_data() for name, law in self.hardware_laws.items()},
            HARDWARE_ORDER: list(self.hardware_laws),
            "routes": {name: route.to_dict() for name, route in self.routes.items()},
            "pooled": pooled,
            "unmeasured_refusal": self.unmeasured_refusal,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_data(), indent=2, sort_keys=True)

    @classmethod
    def from_data(cls, data: JsonObject) -> FleetLaw:
        """Inverse of :meth:`to_data` (raises KeyError, TypeError or ValueError on a malformed field)."""
        laws = in_fitted_order(
            {str(k): FittedLaw.from_json(json.dumps(v)) for k, v in data["hardware_laws"].items()}, data
        )
        pooled = data.get("pooled")
        return cls(
            hardware_laws=laws,
            routes={str(k): FleetRoute.from_dict(v) for k, v in data["routes"].items()},
            pooled=dataclasses.replace(FittedLaw.from_json(json.dumps(pooled)), hardware_laws=laws) if pooled else None,
            unmeasured_refusal=str(data.get("unmeasured_refusal") or ""),
        )


def law_from_json(text: str) -> FittedLaw | FleetLaw:
    """The law of a model's JSON: a :class:`FleetLaw` where ``kind`` is ``fleet``, else a :class:`FittedLaw`.

    Raises:
        LawFileError: another schema version, or a field missing or malformed.
    """
    data = json.loads(text)
    if not isinstance(data, dict) or data.get("kind") != FLEET_KIND:
        return FittedLaw.from_json(text)
    version = int(data.get("schema_version", 0))
    if version != LAW_SCHEMA_VERSION:
        raise LawFileError(f"model: law schema_version {version} is not {LAW_SCHEMA_VERSION}; refit the model")
    try:
        return FleetLaw.from_data(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise LawFileError(f"model: the fleet law JSON has a missing or malformed field ({exc!r}); refit") from exc
