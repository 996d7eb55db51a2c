"""The roofline x efficiency energy laws as plain data, evaluated with numpy.

Two forms share the efficiency and strategy factors and differ in their cost part:

- :class:`RooflineLaw`, the additive roofline (kind ``roofline_eff``):
  ``E = (eps_c*C + eps_m*M + e_0*T) * eta^alpha_eta * exp(psi[strategy])``;
- :class:`SmoothRooflineLaw`, the smooth roofline in time (kind ``roofline_smooth``):
  ``E = ( ((eps_c*C)^k + (eps_m*M)^k)^(1/k) + e_0*T ) * eta^alpha_eta * exp(psi[strategy])``.

Energies in joules, with ``C`` the job's FLOP proxy, ``M`` its memory-traffic proxy
(elements), ``T`` its tokens and ``eps_c >= 0`` (J/FLOP), ``eps_m >= 0`` (J/element),
``e_0 >= 0`` (J/token: the fixed cost per token of a device that is busy but not
saturated). ``psi`` is 0 for the reference strategy (the first one the fit saw,
``single`` where present).

Each has a variant in the complete proxies (kinds ``roofline_complete`` and
``roofline_complete_smooth``, :class:`CompleteRooflineLaw`, :class:`SmoothCompleteRooflineLaw`):
``C`` is ``C_all`` (the layers and the vocabulary head, FLOPs), ``M`` is ``M_all`` (activation
bytes plus the optimizer's state traffic, which carries LoRA's trainable parameters, bytes:
``eps_m`` is then J/byte), and the law is also multiplied by ``exp(psi[kind])`` for each kind
dummy the fit estimated (``arch[T.decoder]``, ``peft[T.lora]``, ``grad_checkpointing[T.true]``:
checkpointing's recompute, LoRA's lighter backward). Every dummy term ``<feature>[T.<level>]``
is 1 where the row's ``feature`` is ``level``, 0 elsewhere (the reference level).

Each has a variant pooled over GPUs by their datasheets (kinds ``hardware_roofline`` and
``hardware_roofline_complete``, :class:`HardwareRooflineLaw`, :class:`HardwareCompleteRooflineLaw`):
energy is the GPU's board power ``P`` times the roofline's time,
``E = P * (eps_c*C/F + eps_v*C/F_v + eps_m*M/B + e_0*T) * eta^alpha_eta * exp(psi)``, with ``F`` its
peak FLOP/s at the run's precision, ``F_v`` its vector (non-tensor FP32) FLOP/s and ``B`` its memory
bandwidth (bytes/s), read from the row's hardware covariates (``log_jpf = log(P/F)``,
``log_jpv = log(P/F_v)``, ``log_ridge = log(F/B)``, ``log_peak = log F``,
:meth:`~core.gpu_datasheets.HardwareSpec.covariates`). ``eps_c``, ``eps_v`` and ``eps_m`` are then
dimensionless (peak over achieved, times average over board power) and ``e_0`` is seconds per
token: shared by every GPU, so a GPU no run measured is answered from its datasheet row. The
vector term is the share of the FLOPs a mixed-precision step does not run on tensor cores (softmax,
normalisation, activations, the optimizer in FP32, every FLOP of a GPU without tensor cores): across
GPU generations the tensor peak grew many times faster than that rate, so a law that charged every
FLOP at the tensor peak would price a GPU without tensor cores several times too high.

The smooth form: energy is power times time, and a step's time is a smooth maximum of
its compute time and its memory time plus a fixed per-step cost; with the (constant)
power folded into the coefficients and every term proportional to the steps, on job
totals, the sharpness ``k >= 1`` (dimensionless) goes from ``k = 1``, the additive
roofline, to ``k -> inf``, the hard ``max`` of the two terms, so a change from memory- to
compute-bound across model sizes is a shape this law can take. The ``k``-norm is used
rather than a log-sum-exp because it is homogeneous of degree one: scaling both terms
scales the maximum, so twice the steps cost twice the joules for every ``k``.

Prediction intervals (log joules) come from the delta method
(:meth:`~mlflow_roofline.law.coefficients.LawCoefficients.predict`): with ``g`` the gradient
of log E with respect to the coefficients (``k`` included) at the new point and ``cov`` the
coefficients' covariance from the fit's Jacobian (``resid_var * (J'J)^-1``), the interval is
``mean -/+ t(df_resid) * sqrt(g' cov g + resid_var)``: the uncertainty of the law plus the
scatter of one new run, as for the linear laws.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import numpy as np

from mlflow_roofline.law.coefficients import LawCoefficients

COST_TERMS: tuple[str, ...] = ("eps_c", "eps_m", "e0")
COST_FEATURES: dict[str, str] = {"eps_c": "log_C", "eps_m": "log_M", "e0": "log_T"}
TENSOR_TERM, VECTOR_PATH_TERM = "eps_ct", "eps_cv"
"""A GPU's law fitted across datapaths (fp32 on the vector units beside tensor-core precisions): the energy per
FLOP (scaled, :mod:`law.log_features`) of each path, in place of ``eps_c``."""
COMPLETE_COST_FEATURES: dict[str, str] = {
    "eps_c": "log_C_all",
    TENSOR_TERM: "log_C_tensor",
    VECTOR_PATH_TERM: "log_C_vector",
    "eps_m": "log_M_all",
    "e0": "log_T",
    "e_step": "log_device_steps",
    "e_layer": "log_layer_steps",
    "eps_w": "log_C_narrow",
}
"""The cost features of the complete-proxy variants: FLOPs with the head (all of them, or per datapath), bytes with
the optimizer's state, tokens, device-steps, layer-steps and FLOPs per unit of matrix width. A law holds the
terms its fit could estimate (:func:`fit.forms.roofline_complete.complete_design`); one stored before the
per-step, width and datapath terms existed holds ``eps_c``, ``eps_m`` and ``e0`` and answers as it did."""
COMPUTE_TERMS: tuple[str, ...] = ("eps_c", TENSOR_TERM, VECTOR_PATH_TERM)
"""The cost terms a smooth roofline takes as its compute time (the k-norm's first argument)."""
MEMORY_TERM = "eps_m"
"""The cost term a smooth roofline takes as its memory time (the k-norm's second argument)."""
VECTOR_TERM = "eps_v"
"""The datasheet-pooled laws' cost of the FLOPs at the GPU's vector (non-tensor FP32) rate."""
HARDWARE_COST_TERMS: tuple[str, ...] = ("eps_c", VECTOR_TERM, "eps_m", "e0")
HARDWARE_COST_SCALES: dict[str, tuple[str, ...]] = {
    "eps_c": ("log_jpf",),
    VECTOR_TERM: ("log_jpv",),
    "eps_m": ("log_jpf", "log_ridge"),
    "e0": ("log_jpf", "log_peak"),
    "e_step": ("log_jpf", "log_peak"),
    "e_layer": ("log_jpf", "log_peak"),
    "eps_w": ("log_jpf",),
}
"""The hardware covariates (logs) each cost of a datasheet-pooled law is multiplied by the exponential of:
FLOPs by joules per peak FLOP at the run's precision (P/F) and by joules per FLOP at the vector rate (P/F_v),
bytes by joules per byte at full bandwidth (P/B = P/F * F/B), tokens, device-steps and layer-steps by the board
power (P = P/F * F, watts: their coefficients are seconds each), FLOPs per unit of width like FLOPs."""
ALPHA_ETA = "alpha_eta"
STRATEGY_PREFIX = "strategy[T."
DUMMY_MARK = "[T."
SHARPNESS = "k"


def dummy_term(feature: str, level: str) -> str:
    """The name of the 0/1 term of ``feature`` at ``level``: ``strategy[T.ddp]``, ``arch[T.decoder]``."""
    return f"{feature}{DUMMY_MARK}{level}]"


def dummy_of(term: str) -> tuple[str, str] | None:
    """(feature, level) of a dummy term, None for any other term."""
    feature, mark, rest = term.partition(DUMMY_MARK)
    return (feature, rest[:-1]) if mark and rest.endswith("]") else None


class RooflineLaw(LawCoefficients):
    """The additive roofline x efficiency law (see the module docstring).

    Attributes:
        formula: the law in words (for people; not parsed).
        terms: coefficient names: ``eps_c``, ``eps_m``, ``e0``, then ``alpha_eta`` and
            ``strategy[T.<name>]`` where the fit estimated them.
        coef: the coefficients (J/FLOP, J/element, J/token, dimensionless, log factors).
        cov: their covariance (from the Jacobian at the optimum).
        resid_var: residual variance of log E (log units squared).
        df_resid: residual degrees of freedom (runs minus coefficients).
    """

    KIND: ClassVar[str] = "roofline_eff"
    cost_features: ClassVar[Mapping[str, str]] = COST_FEATURES
    """The feature (a log) each cost coefficient multiplies the exponential of, in the order the fit estimates them."""

    def _cost(self, features: Mapping[str, np.ndarray]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The cost part (joules before the eta and strategy factors) and its gradient per cost coefficient
        (the cost terms this law holds: a law stored before a term existed is evaluated without it)."""
        held = [t for t in self.cost_features if t in self.terms]
        costs = {t: np.exp(self.cost_log(features, t)) for t in held}
        total = sum(self.coefficient(t) * costs[t] for t in held)
        return np.asarray(total, dtype=float), costs

    def mean_and_gradient(self, features: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """log E of each row and the gradient of log E with respect to the coefficients (rows x terms)."""
        total, grads = self._cost(features)
        log_eta = np.asarray(features["log_eta"], dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = np.log(total) + self.coefficient(ALPHA_ETA) * log_eta
            columns = []
            for term in self.terms:
                if term in grads:
                    columns.append(grads[term] / total)
                elif term == ALPHA_ETA:
                    columns.append(log_eta)
                else:
                    is_level = self._indicator(features, term)
                    mean = mean + self.coefficient(term) * is_level
                    columns.append(is_level)
        return mean, np.column_stack(columns)

    @classmethod
    def cost_log(cls, features: Mapping[str, np.ndarray], term: str) -> np.ndarray:
        """The log of what cost coefficient ``term`` multiplies (its proxy: FLOPs, elements or bytes, tokens)."""
        return np.asarray(features[cls.cost_features[term]], dtype=float)

    @staticmethod
    def _indicator(features: Mapping[str, np.ndarray], term: str) -> np.ndarray:
        """1.0 where the row is at the dummy ``term``'s level (``strategy[T.ddp]``, ``arch[T.decoder]``), else 0.0."""
        parsed = dummy_of(term)
        if parsed is None:
            raise ValueError(f"law term {term!r} is neither a cost, alpha_eta nor a dummy <feature>[T.<level>]")
        feature, level = parsed
        values = np.asarray(features[feature], dtype=object)
        hit = np.zeros(len(values), dtype=bool)
        for value in [v for v in set(values.tolist()) if str(v) == level]:  # as text: each distinct value once
            hit |= values == value
        return hit.astype(float)


def smooth_max(a: np.ndarray, b: np.ndarray, k: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``S = (a^k + b^k)^(1/k)`` for ``a, b >= 0`` and ``k >= 1``, and its partials dS/da, dS/db, dS/dk.

    Computed relative to ``max(a, b)`` so that no power overflows for large ``k``;
    ``S`` has the units of ``a`` and ``b``.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    top = np.maximum(a, b)
    safe_top = np.where(top > 0, top, 1.0)
    ra, rb = a / safe_top, b / safe_top  # in [0, 1]
    pa, pb = ra**k, rb**k
    norm = pa + pb  # in [1, 2] where top > 0
    safe_norm = np.where(norm > 0, norm, 1.0)
    root = safe_norm ** (1.0 / k)
    s = top * root
    qa, qb = ra / root, rb / root  # a/S and b/S, in [0, 1]
    wa, wb = pa / safe_norm, pb / safe_norm  # the weights (a/S)^k and (b/S)^k, summing to 1
    with np.errstate(divide="ignore"):
        la = np.where(qa > 0, np.log(np.where(qa > 0, qa, 1.0)), 0.0)
        lb = np.where(qb > 0, np.log(np.where(qb > 0, qb, 1.0)), 0.0)
    return s, qa ** (k - 1.0), qb ** (k - 1.0), s / k * (wa * la + wb * lb)


class SmoothRooflineLaw(RooflineLaw):
    """The smooth roofline in time (see the module docstring).

    Same attributes as :class:`RooflineLaw`; ``terms`` are ``eps_c``, ``eps_m``, ``e0``,
    ``k``, then ``alpha_eta`` and ``strategy[T.<name>]`` where the fit estimated them.
    """

    KIND: ClassVar[str] = "roofline_smooth"

    def _cost(self, features: Mapping[str, np.ndarray]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The cost part (joules) and its gradient with respect to each cost coefficient and k: the k-norm of
        the compute costs' sum and the memory cost, plus the other costs (tokens; device- and layer-steps and
        the width term where the law holds them)."""
        held = [t for t in self.cost_features if t in self.terms]
        costs = {t: np.exp(self.cost_log(features, t)) for t in held}
        compute = sum(self.coefficient(t) * costs[t] for t in held if t in COMPUTE_TERMS)
        memory = self.coefficient(MEMORY_TERM) * costs[MEMORY_TERM] if MEMORY_TERM in costs else np.zeros_like(compute)
        k = max(self.coefficient(SHARPNESS), 1.0)
        s, ds_da, ds_db, ds_dk = smooth_max(np.asarray(compute, dtype=float), np.asarray(memory, dtype=float), k)
        grads = {t: (ds_da * cost if t in COMPUTE_TERMS else cost) for t, cost in costs.items()}
        grads[SHARPNESS] = ds_dk
        if MEMORY_TERM in costs:  # a fold whose runs could not tell bytes from another cost fitted none
            grads[MEMORY_TERM] = ds_db * costs[MEMORY_TERM]
        rest = sum(self.coefficient(t) * costs[t] for t in held if t not in COMPUTE_TERMS and t != MEMORY_TERM)
        return s + rest, grads


class CompleteRooflineLaw(RooflineLaw):
    """The additive roofline in the complete proxies, with the kind dummies (see the module docstring).

    ``terms``: ``eps_c`` (J/FLOP of ``C_all``; or ``eps_ct`` and ``eps_cv``, J/FLOP of its tensor-core and FP32
    parts), ``eps_m`` (J/byte of ``M_all``), ``e0`` (J/token), ``e_step`` (J per device-step), ``e_layer`` (J per
    device-layer-step), ``eps_w`` (J per FLOP per unit of width, on ``C_all / w``), each where the fit estimated
    it, then ``alpha_eta``, ``strategy[T.<name>]`` and ``<kind>[T.<level>]`` where the fit estimated them.
    """

    KIND: ClassVar[str] = "roofline_complete"
    cost_features: ClassVar[Mapping[str, str]] = COMPLETE_COST_FEATURES


class SmoothCompleteRooflineLaw(SmoothRooflineLaw):
    """The smooth roofline in time in the complete proxies, with the kind dummies (see the module docstring)."""

    KIND: ClassVar[str] = "roofline_complete_smooth"
    cost_features: ClassVar[Mapping[str, str]] = COMPLETE_COST_FEATURES


class HardwareRooflineLaw(RooflineLaw):
    """The additive roofline pooled over GPUs by their datasheets (see the module docstring): each cost
    is the proxy times the row's hardware factor (:data:`HARDWARE_COST_SCALES`), so the coefficients are
    shared by every GPU. ``terms``: ``eps_c``, ``eps_v``, ``eps_m`` (dimensionless), ``e0`` (s/token), then
    ``alpha_eta`` and the dummies the fit estimated (a law stored before ``eps_v`` existed lacks it)."""

    KIND: ClassVar[str] = "hardware_roofline"
    cost_features: ClassVar[Mapping[str, str]] = {
        "eps_c": "log_C",
        VECTOR_TERM: "log_C",
        "eps_m": "log_M",
        "e0": "log_T",
    }

    @classmethod
    def cost_log(cls, features: Mapping[str, np.ndarray], term: str) -> np.ndarray:
        """log(proxy x hardware factor): log J of the cost at a coefficient of 1."""
        total = np.asarray(features[cls.cost_features[term]], dtype=float)
        for covariate in HARDWARE_COST_SCALES[term]:
            total = total + np.asarray(features[covariate], dtype=float)
        return total


class HardwareCompleteRooflineLaw(HardwareRooflineLaw):
    """The datasheet-pooled additive roofline in the complete proxies, with the kind dummies, and, as the
    one-GPU complete roofline, a cost per device-step and per device-layer-step (seconds each, times the
    board power) and the narrow matrices' ``C_all/w`` at the peak; a law stored before those held none."""

    KIND: ClassVar[str] = "hardware_roofline_complete"
    cost_features: ClassVar[Mapping[str, str]] = {
        "eps_c": "log_C_all",
        VECTOR_TERM: "log_C_all",
        "eps_m": "log_M_all",
        "e0": "log_T",
        "e_step": "log_device_steps",
        "e_layer": "log_layer_steps",
        "eps_w": "log_C_narrow",
    }


class HardwareRooflineTimeLaw(HardwareCompleteRooflineLaw):
    """Seconds one device takes for a job, pooled over GPUs by their datasheets (kind ``hardware_roofline_time``):
    ``t1 = (eps_c*C_all/F + eps_v*C_all/F_v + eps_m*M_all/B + e0*T + e_step*steps + e_layer*L*steps
    + eps_w*C_all/(w*F)) * exp(psi[kind])``, the costs of :class:`HardwareCompleteRooflineLaw` without the board
    power (each cost's hardware factor over ``P``): ``eps_c``, ``eps_v``, ``eps_m``, ``eps_w`` dimensionless (peak
    over achieved rate), ``e0``, ``e_step``, ``e_layer`` seconds per token, step and layer-step. Its mean is log
    seconds (:mod:`fit.pooled_time`), fitted on single-device runs, so it has no ``alpha_eta`` or strategy term."""

    KIND: ClassVar[str] = "hardware_roofline_time"

    @classmethod
    def cost_log(cls, features: Mapping[str, np.ndarray], term: str) -> np.ndarray:
        """log(proxy x hardware factor / board power): log seconds of the cost at a coefficient of 1."""
        board_power = np.asarray(features["log_jpf"], dtype=float) + np.asarray(features["log_peak"], dtype=float)
        return super().cost_log(features, term) - board_power
