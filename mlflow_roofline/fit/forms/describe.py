"""How a fitted energy law is written for people (the fit run's description): symbols, exponents, coefficients.

Each form family writes its own law (:meth:`~fit.forms.fitted_form.FittedForm.describe`) with the
pieces here: :func:`power_law_formula` for the log-linear laws, :func:`roofline_formula` for the
roofline-shaped ones; :func:`term_name` names one coefficient in the coefficient table.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from mlflow_roofline.law.log_features import KIND_FEATURES
from mlflow_roofline.law.roofline_efficiency import (
    ALPHA_ETA,
    COMPUTE_TERMS,
    HARDWARE_COST_SCALES,
    MEMORY_TERM,
    SHARPNESS,
    HardwareRooflineLaw,
    RooflineLaw,
)

SYMBOLS = {
    "log_C": "C",
    "log_M": "M",
    "log_C_all": "(C + C<sub>head</sub>)",
    "log_M_all": "(M + M<sub>opt</sub>)",
    "log_eta": "η<sub>h</sub>",
    "log_N": "N",
    "log_steps": "steps",
}
"""The proxy each exponent of a power law raises (a per-step form's law in job totals raises the steps to
``1 - α_C - α_M``: its energy is the steps times a power law of the work per step)."""
COST_SYMBOLS = {
    **SYMBOLS,
    "log_T": "T",
    "log_C_tensor": "(C + C<sub>head</sub>)<sub>tensor</sub>",
    "log_C_vector": "(C + C<sub>head</sub>)<sub>FP32</sub>",
    "log_C_narrow": "(C + C<sub>head</sub>)/w",
    "log_device_steps": "N·steps",
    "log_layer_steps": "N·L·steps",
}
"""What each cost of a roofline law multiplies (T: tokens; w: the matrix width per device)."""
_PER_HARDWARE = {
    ("log_jpf",): "/F",
    ("log_jpv",): "/F<sub>v</sub>",
    ("log_jpf", "log_ridge"): "/B",
    ("log_jpf", "log_peak"): "",
}
"""A datasheet-pooled cost's hardware factor (:data:`~law.roofline_efficiency.HARDWARE_COST_SCALES`, over the
board power P) as the report writes it: over the peak F, the vector peak F_v, the bandwidth B, or P alone."""
_NAMES = {
    "Intercept": "log κ",
    "log_C": "α<sub>C</sub>",
    "log_M": "α<sub>M</sub>",
    "log_C_all": "α<sub>C</sub> (C + C<sub>head</sub>)",
    "log_M_all": "α<sub>M</sub> (M + M<sub>opt</sub>)",
    "log_eta": "α<sub>η</sub>",
    "log_N": "α<sub>N</sub>",
    "log_steps": "α<sub>steps</sub> (1 − α<sub>C</sub> − α<sub>M</sub>: energy per step times the steps)",
    SHARPNESS: "k (sharpness of the compute/memory maximum)",
}
_STRATEGY = re.compile(r"^strategy\[T\.(?P<level>[^\]]+)\](?::(?P<slope>\w+))?$")
_KIND = re.compile(rf"^(?P<kind>{'|'.join(KIND_FEATURES)})\[T\.(?P<level>[^\]]+)\]$")


def num(value: float) -> str:
    """A figure as the report prints it: three significant digits, ``n/a`` when not finite."""
    return "n/a" if not math.isfinite(value) else f"{value:.3g}"


def power_law_formula(terms: Sequence[str], coef: Sequence[float]) -> str:
    """``κ · C^a · M^b · η^c · Ψ(strategy)`` with the fitted exponents as superscripts."""
    factors = ["κ"]
    for term, value in zip(terms, coef):
        if term in SYMBOLS:
            factors.append(f"{SYMBOLS[term]}<sup>{num(value)}</sup>")
    slopes = sorted({m["slope"] for t in terms if (m := _STRATEGY.match(t)) and m["slope"]})
    factors += [f"{SYMBOLS.get(s, s)}<sup>δ<sub>strategy</sub></sup>" for s in slopes]
    if any((m := _STRATEGY.match(t)) and not m["slope"] for t in terms):
        factors.append("Ψ(strategy)")
    if any(_KIND.match(t) for t in terms):
        factors.append("Ψ(kind)")
    return " · ".join(factors)


def roofline_formula(law: RooflineLaw) -> str:
    """``(ε_c·C + ε_m·M + e_0·T) · η^a · Ψ(strategy)`` (T: tokens) with each cost the law holds, the smooth
    roofline's cost as the ``k``-norm of its compute and memory costs plus the others, the datasheet-pooled
    one as ``P · (ε_c·C/F + ε_v·C/F_v + ε_m·M/B + e_0·T) · ...``, with the fitted values."""
    pooled = isinstance(law, HardwareRooflineLaw)  # times the GPU's board power P, over its peaks and bandwidth
    costs = {
        term: f"{num(law.coefficient(term))}·{_cost_symbol(law, term, pooled)}"
        for term in law.cost_features
        if term in law.terms
    }
    cost = " + ".join(costs.values())
    if SHARPNESS in law.terms:
        k = num(law.coefficient(SHARPNESS))
        compute = " + ".join(v for t, v in costs.items() if t in COMPUTE_TERMS)
        memory = costs.get(MEMORY_TERM, "0")  # a law whose runs could not tell bytes from another cost has none
        rest = "".join(f" + {v}" for t, v in costs.items() if t not in COMPUTE_TERMS and t != MEMORY_TERM)
        cost = f"(({compute})<sup>{k}</sup> + ({memory})<sup>{k}</sup>)<sup>1/{k}</sup>{rest}"
    eta = f" · η<sub>h</sub><sup>{num(law.coefficient(ALPHA_ETA))}</sup>" if ALPHA_ETA in law.terms else ""
    psi = " · Ψ(strategy)" if any(t.startswith("strategy[") for t in law.terms) else ""
    kind = " · Ψ(kind)" if any(_KIND.match(t) for t in law.terms) else ""
    return f"{'P · ' if pooled else ''}({cost}){eta}{psi}{kind}"


def _cost_symbol(law: RooflineLaw, term: str, pooled: bool) -> str:
    """What cost coefficient ``term`` multiplies, as the report writes it (``(C + C_head)``, ``M/B``...): a
    datasheet-pooled law's cost over the peak or bandwidth its hardware factor divides by (the board power
    ``P`` written outside)."""
    symbol = COST_SYMBOLS[law.cost_features[term]]
    per = _PER_HARDWARE[HARDWARE_COST_SCALES[term]] if pooled else ""
    return f"({symbol}){per}" if per else symbol


def term_name(term: str) -> str:
    """One coefficient's name in the report's coefficient table (``α<sub>C</sub>``, ``log Ψ<sub>fsdp</sub>``)."""
    kind = _KIND.match(term)
    if kind:
        return f"log Ψ<sub>{kind['kind']}={kind['level']}</sub>"
    match = _STRATEGY.match(term)
    if match and match["slope"]:
        return f"δ<sub>{match['level']}</sub> (extra {SYMBOLS.get(match['slope'], match['slope'])} exponent)"
    if match:
        return f"log Ψ<sub>{match['level']}</sub>"
    return _NAMES.get(term, f"`{term}`")
