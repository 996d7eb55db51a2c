"""The table of energy-law forms: their names, statsmodels formulas and which to evaluate.

Forms (responses ``log_E``: log joules; ``log_t1``: log seconds on one device):

- ``baseline``        ``log_E ~ log_C + log_M + strategy``
- ``paper``           ``log_E ~ log_C + log_M + log_eta + strategy`` (the efficiency-aware law)
- ``paper_log_n``     ``+ log_N``: a device-count cost beyond what eta explains
- ``eta_by_strategy`` ``+ strategy:log_eta``: an efficiency exponent per strategy
- ``paper_per_work``  the paper's form with alpha_c + alpha_m = 1, i.e. energy
  proportional to the work at a given per-step mix (twice the steps, twice the joules):
  ``I(log_E - log_M) ~ I(log_C - log_M) + log_eta + strategy``, stored as the
  equivalent law in log_C and log_M
- ``paper_per_step``  the paper's law for one optimizer step, times the steps: energy
  per step a power law of the FLOPs and traffic per step, so twice the steps are twice
  the joules while the size exponents stay free:
  ``I(log_E - log_steps) ~ I(log_C - log_steps) + I(log_M - log_steps) + log_eta + strategy``,
  stored as the equivalent law in log_C, log_M and log_steps

Forms in the complete proxies (:data:`COMPLETE_FORMS`: the vocabulary head in the FLOPs,
the optimizer's state in the traffic, :mod:`law.log_features`), evaluated only where some run
is not the paper's kind (a decoder, LoRA adapters or activation checkpointing), so that a fit
of the paper's runs alone is the paper's comparison, unchanged:

- ``complete``          ``log_E ~ log_C_all + log_M_all + log_eta + strategy + kinds``
- ``complete_per_step`` the per-step form in them:
  ``I(log_E - log_steps) ~ I(log_C_all - log_steps) + I(log_M_all - log_steps) + log_eta + strategy + kinds``

``kinds`` are the categoricals ``arch``, ``peft`` and ``grad_checkpointing``, each only where
both of its levels are among the runs (never a constant column), the paper's level the
reference (``arch[T.decoder]``, ``peft[T.lora]``, ``grad_checkpointing[T.true]``).

Roofline-shaped forms (non-linear, :data:`ROOFLINE_FORMS`, each refitted on every CV fold
and in the extrapolation check):

- ``roofline_eff``    ``E = (eps_c*C + eps_m*M + e0*T) * eta^alpha_eta * Psi`` (:mod:`fit.forms.roofline_eff`)
- ``roofline_smooth`` ``E = (((eps_c*C)^k + (eps_m*M)^k)^(1/k) + e0*T) * eta^alpha_eta * Psi``,
  the smooth roofline in time with fitted sharpness ``k >= 1`` (:mod:`fit.forms.roofline_smooth`)
- ``roofline_complete`` and ``roofline_complete_smooth`` (:data:`COMPLETE_ROOFLINE_FORMS`): the
  same two in the complete proxies ``C_all``, ``M_all``, times ``exp(psi[kind])`` for the kinds
  (:mod:`fit.forms.roofline_complete`); like the complete OLS forms, evaluated only where some
  run is not the paper's kind (:func:`roofline_candidates`)

``strategy`` is a categorical with ``single`` as reference (so ``log_kappa`` is the
single-device intercept and the dummies read ``strategy[T.fsdp]``); with one strategy
only, the dummy is dropped. The OLS fit of a form is :mod:`fit.forms.ols`; the additive
roofline :mod:`fit.forms.additive`; the time law :mod:`fit.forms.time_law`; choosing among forms
:mod:`fit.forms.selection`.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from mlflow_roofline.fit.forms.fitted_form import FittedForm
from mlflow_roofline.fit.forms.nonlinear import measured_kinds
from mlflow_roofline.fit.forms.roofline_complete import (
    ROOFLINE_COMPLETE,
    ROOFLINE_COMPLETE_SMOOTH,
    fit_roofline_complete,
    fit_roofline_complete_smooth,
)
from mlflow_roofline.fit.forms.roofline_eff import ROOFLINE_EFF, fit_roofline_eff
from mlflow_roofline.fit.forms.roofline_smooth import ROOFLINE_SMOOTH, fit_roofline_smooth
from mlflow_roofline.law.log_features import KIND_FEATURES, KIND_LEVELS

BASELINE = "baseline"
PAPER = "paper"
PAPER_LOG_N = "paper_log_n"
ETA_BY_STRATEGY = "eta_by_strategy"
HARDWARE_SLOPES = "hardware_slopes"
HARDWARE_INTERCEPTS = "hardware_intercepts"
PER_WORK = "paper_per_work"
PER_WORK_TERM = "I(log_C - log_M)"
PER_STEP = "paper_per_step"
COMPLETE = "complete"
COMPLETE_PER_STEP = "complete_per_step"
COMPLETE_FORMS: tuple[str, ...] = (COMPLETE, COMPLETE_PER_STEP)
"""The forms in the complete proxies (the head's FLOPs, the optimizer's bytes) with the kind categoricals."""

FORM_TERMS: dict[str, str] = {
    BASELINE: "log_C + log_M",
    PAPER: "log_C + log_M + log_eta",
    PAPER_LOG_N: "log_C + log_M + log_eta + log_N",
    ETA_BY_STRATEGY: "log_C + log_M + log_eta",
    PER_WORK: f"{PER_WORK_TERM} + log_eta",
    PER_STEP: "I(log_C - log_steps) + I(log_M - log_steps) + log_eta",
    COMPLETE: "log_C_all + log_M_all + log_eta",
    COMPLETE_PER_STEP: "I(log_C_all - log_steps) + I(log_M_all - log_steps) + log_eta",
}
RESPONSE_OFFSET: dict[str, str] = {PER_WORK: "log_M", PER_STEP: "log_steps", COMPLETE_PER_STEP: "log_steps"}
"""The feature a form's response is taken relative to (``I(log_E - log_M) ~ ...``)."""

ROOFLINE_FORMS: dict[str, Callable[[pd.DataFrame], FittedForm]] = {
    ROOFLINE_EFF: fit_roofline_eff,
    ROOFLINE_SMOOTH: fit_roofline_smooth,
    ROOFLINE_COMPLETE: fit_roofline_complete,
    ROOFLINE_COMPLETE_SMOOTH: fit_roofline_complete_smooth,
}
"""Every form fitted by its own function, by name (evaluated in this order, after the OLS forms): the roofline
family today. A new form family is one module (its law, a :class:`~fit.forms.fitted_form.FittedForm` subclass
and its fit function) and one line here."""
COMPLETE_ROOFLINE_FORMS: tuple[str, ...] = (ROOFLINE_COMPLETE, ROOFLINE_COMPLETE_SMOOTH)
"""The roofline-shaped forms in the complete proxies (candidates only where runs are beyond the paper's kind)."""
COMPLETE_PROXY_FORMS: tuple[str, ...] = (*COMPLETE_FORMS, *COMPLETE_ROOFLINE_FORMS)
"""Every form in the complete proxies, OLS and roofline-shaped (the family :mod:`fit.forms.proxy_comparison` weighs)."""


def kind_terms(data: pd.DataFrame) -> list[str]:
    """The kind categoricals with both levels among ``data``'s runs (none where a column is absent)."""
    return measured_kinds(data)


def kind_suffix(data: pd.DataFrame) -> str:
    """`` + arch + peft ...``: the :func:`kind_terms` of ``data`` as formula terms (empty where none)."""
    return "".join(f" + {name}" for name in kind_terms(data))


def beyond_paper(data: pd.DataFrame) -> bool:
    """True where some run is not the paper's kind: a decoder, LoRA adapters or activation checkpointing."""
    return any(name in data and bool((data[name] != KIND_LEVELS[name][0]).any()) for name in KIND_FEATURES)


def formula_of(form: str, data: pd.DataFrame, response: str = "log_E") -> str:
    """The statsmodels formula of ``form`` on ``data`` (no strategy dummy with one strategy).

    A complete-proxy form also takes each kind categorical present at both levels (:func:`kind_terms`).
    """
    rhs = FORM_TERMS[form]
    if data["strategy"].nunique() > 1:
        rhs += " + strategy"
        if form == ETA_BY_STRATEGY:
            rhs += " + strategy:log_eta"
    if form in COMPLETE_FORMS:
        rhs += kind_suffix(data)
    lhs = f"I({response} - {RESPONSE_OFFSET[form]})" if form in RESPONSE_OFFSET else response
    return f"{lhs} ~ {rhs}"


def candidate_forms(data: pd.DataFrame) -> list[str]:
    """The forms worth evaluating on ``data``: baseline, paper and per-work always, richer ones when identifiable.

    The complete-proxy forms come last, where some run is not the paper's kind (:func:`beyond_paper`).
    """
    forms = [BASELINE, PAPER, PER_WORK, PER_STEP]
    parallel = data[data["strategy"] != "single"]
    if parallel["log_N"].nunique() > 1:
        forms.append(PAPER_LOG_N)
    if parallel["strategy"].nunique() > 1:
        forms.append(ETA_BY_STRATEGY)
    if beyond_paper(data):
        forms += COMPLETE_FORMS
    return forms


def roofline_candidates(data: pd.DataFrame) -> list[str]:
    """The roofline-shaped forms worth evaluating on ``data``: those in the complete proxies only where
    some run is not the paper's kind (:func:`beyond_paper`), as for the complete OLS forms."""
    beyond = beyond_paper(data)
    return [name for name in ROOFLINE_FORMS if beyond or name not in COMPLETE_ROOFLINE_FORMS]
