"""The fleet model of a fit over several GPUs: each GPU's law, the pooled law, and the route of each GPU.

Built from the per-GPU fits and the pooled comparison (:mod:`fit.pooled`), without MLflow:

- the pooled law that may answer a measured GPU is the pooled comparison's chosen form, or,
  where separate slopes won (one law per GPU, nothing pooled), the best other sane pooled
  form by the same 1-SE rule; none where no pooled form passed the sanity checks;
- each measured GPU is routed to its own law or that pooled law by their errors on its
  held-out bigger models (:mod:`fit.fleet_routes`);
- a GPU of the hardware table no run measured is answered by the pooled law's covariate
  form (the sane one with the smallest leave-one-GPU-out error); where there is none, the
  reason is kept and the served model refuses such a GPU with it.

The result is a :class:`FleetFit`: the :class:`~law.fleet.FleetLaw` the parent fit run logs and
registers as ``@champion``, its metrics (:data:`~core.schema.M_ROUTE_PREFIX` and both errors per
GPU) and report.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence

from mlflow_roofline.core.schema import (
    M_FLEET_ANSWERS_UNMEASURED,
    M_ROUTE_OWN_MAPE_PREFIX,
    M_ROUTE_POOLED_MAPE_PREFIX,
    M_ROUTE_PREFIX,
    form_metric,
)
from mlflow_roofline.fit.fleet_routes import fleet_routes
from mlflow_roofline.fit.forms.averaging import AVERAGED
from mlflow_roofline.fit.forms.selection import choose_form
from mlflow_roofline.fit.hardware_fit import HardwareFit
from mlflow_roofline.fit.pooled import HARDWARE_SLOPES, PooledFit, pooled_law
from mlflow_roofline.fit.registration import hardware_slug
from mlflow_roofline.law.fleet import OWN, FleetLaw

FLEET_FORM = "fleet"


@dataclasses.dataclass(frozen=True)
class _Chosen:
    chosen: str


@dataclasses.dataclass(frozen=True)
class FleetFit:
    """The fleet model and what registration reads of it (as of a per-GPU fit).

    Attributes:
        law: the fleet law.
        pooled_form: the pooled form that may answer a measured GPU ("" where none is sane).
        run_id, model_version, aliases: empty until logged and registered (copies made by :mod:`fit.fit_runs`).
    """

    law: FleetLaw
    pooled_form: str
    run_id: str = ""
    model_version: str | None = None
    aliases: tuple[str, ...] = ()

    @property
    def hardware(self) -> str:
        return self.law.hardware

    @property
    def energy_source(self) -> str:
        return self.law.energy_source

    @property
    def energy(self) -> _Chosen:
        """The form registration tags the version with: ``fleet``."""
        return _Chosen(FLEET_FORM)

    def metrics(self) -> dict[str, float]:
        """Per measured GPU ``route_<slug>`` (1 own law, 0 pooled law), ``route_own_mape_<slug>`` and
        ``route_pooled_mape_<slug>`` (% on its held-out bigger models; NaN where not checked);
        ``fleet_answers_unmeasured`` (1 when a GPU of the hardware table no run measured is answered)."""
        out = {M_FLEET_ANSWERS_UNMEASURED: float(self.law.answers_unmeasured)}
        for name, slug in metric_slugs(list(self.law.routes)).items():
            route = self.law.routes[name]
            out[form_metric(M_ROUTE_PREFIX, slug)] = float(route.law == OWN)
            out[form_metric(M_ROUTE_OWN_MAPE_PREFIX, slug)] = route.own_mape
            out[form_metric(M_ROUTE_POOLED_MAPE_PREFIX, slug)] = route.pooled_mape
        return out

    def report(self) -> str:
        """The routes in words, one line per measured GPU, then what answers a GPU no run measured."""
        pooled = f"pooled law {self.pooled_form}" if self.pooled_form else "no pooled law (none sane)"
        lines = [f"fleet model over {len(self.law.hardware_laws)} GPUs ({pooled}); bigger models, MAPE %:"]
        for name, route in self.law.routes.items():
            lines.append(
                f"  {name:20s} own {route.own_mape:.3g}  pooled {route.pooled_mape:.3g}  -> answered by {route.law}"
            )
        unmeasured = "the pooled covariate form" if self.law.answers_unmeasured else "refused"
        pooled_law = self.law.pooled
        if self.law.answers_unmeasured and pooled_law is not None and pooled_law.loho_mape is not None:
            covariate_law = pooled_law.covariate_law
            if pooled_law.covariate_form == AVERAGED and covariate_law is not None:
                unmeasured += f" {AVERAGED} ({covariate_law.formula}), its members up to"
            else:
                unmeasured += f" {pooled_law.covariate_form},"
            unmeasured += (
                f" {pooled_law.loho_mape:.3g} % off on a measured GPU left out (its energy interval widened by as much)"
            )
            if pooled_law.unmeasured_time_law is not None:
                unmeasured += "; its time by the roofline in time pooled over the measured GPUs"
        refusal = f" ({self.law.unmeasured_refusal})" if self.law.unmeasured_refusal else ""
        lines.append(f"a GPU of the hardware table no run measured: {unmeasured}{refusal}")
        return "\n".join(lines)


def metric_slugs(names: Sequence[str]) -> dict[str, str]:
    """Each hardware name's slug in metric names; a slug another name made already gets its sha256's first 8 hex."""
    slugs: dict[str, str] = {}
    for name in names:
        slug = hardware_slug(name)
        if slug in slugs.values():
            slug = f"{slug}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
        slugs[name] = slug
    return slugs


def fleet_pooled_form(pooled: PooledFit) -> str:
    """The pooled form that may answer a measured GPU: the chosen one, else the best other sane one ("" none)."""
    if pooled.chosen != HARDWARE_SLOPES:
        return pooled.chosen
    eligible = {n: f for n, f in pooled.forms.items() if n != HARDWARE_SLOPES and n not in pooled.insane}
    return choose_form(eligible, default="") if eligible else ""


def unmeasured_refusal(pooled: PooledFit, form: str) -> str:
    """Why a GPU no run measured cannot be answered ("" where the covariate form answers it)."""
    if pooled.missing:
        return (
            f"the hardware table lacks the measured {', '.join(pooled.missing)}, so no pooled form "
            "relates a GPU's table row to its energy (extend the table with ROOFLINE_HARDWARE_TABLE)"
        )
    if pooled.covariate_form:
        return ""
    # each form named: its first problem alone reads the same for several forms ("A40: energy decreases ...")
    why = "; ".join(f"{name}: {problems[0]}" for name, problems in pooled.insane.items() if problems)
    what = "no pooled law passed" if not form else "no pooled form of the hardware table's covariates passed"
    return f"{what} the sanity checks ({why or 'none was fitted'})"


def fit_fleet(fits: Sequence[HardwareFit], pooled: PooledFit) -> FleetFit:
    """The fleet model of ``fits`` (two GPUs or more, most runs first) and their pooled comparison."""
    form = fleet_pooled_form(pooled)
    law = pooled_law(pooled, fits, form) if form else None
    routes = fleet_routes(fits, pooled.forms[form] if form else None, pooled.data)
    fleet = FleetLaw(
        hardware_laws={f.hardware: f.law for f in fits},
        routes=routes,
        pooled=law,
        unmeasured_refusal=unmeasured_refusal(pooled, form),
    )
    return FleetFit(law=fleet, pooled_form=form)
