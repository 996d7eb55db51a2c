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
from mlflow_roofline.law.roofline_efficiency import ALPHA_ETA, SHARPNESS, VECTOR_TERM, HardwareRooflineLaw, RooflineLaw

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
    """``(ε_c·C + ε_m·M + e_0·T) · η^a · Ψ(strategy)`` (T: tokens), the smooth roofline's cost as its
    ``k``-norm ``((ε_c·C)^k + (ε_m·M)^k)^(1/k) + e_0·T``, the datasheet-pooled one as
    ``P · (ε_c·C/F + ε_v·C/F_v + ε_m·M/B + e_0·T) · ...``, with the fitted values."""
    compute, memory = (SYMBOLS[law.cost_features[n]] for n in ("eps_c", "eps_m"))  # C or C + C_head, ...
    # the datasheet-pooled law: times the GPU's board power P, over its peaks F, F_v and bandwidth B
    pooled = isinstance(law, HardwareRooflineLaw)
    vector = ""
    if pooled:
        if VECTOR_TERM in law.terms:
            vector = f" + {num(law.coefficient(VECTOR_TERM))}·({compute})/F<sub>v</sub>"
        compute, memory = f"({compute})/F", f"({memory})/B"
    flops, traffic, tokens = (
        f"{num(law.coefficient(n))}·{sym}" for n, sym in (("eps_c", compute), ("eps_m", memory), ("e0", "T"))
    )
    cost = f"{flops}{vector} + {traffic} + {tokens}"
    if SHARPNESS in law.terms:
        k = num(law.coefficient(SHARPNESS))
        cost = f"(({flops})<sup>{k}</sup> + ({traffic})<sup>{k}</sup>)<sup>1/{k}</sup> + {tokens}"
    eta = f" · η<sub>h</sub><sup>{num(law.coefficient(ALPHA_ETA))}</sup>" if ALPHA_ETA in law.terms else ""
    psi = " · Ψ(strategy)" if any(t.startswith("strategy[") for t in law.terms) else ""
    kind = " · Ψ(kind)" if any(_KIND.match(t) for t in law.terms) else ""
    return f"{'P · ' if pooled else ''}({cost}){eta}{psi}{kind}"


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
