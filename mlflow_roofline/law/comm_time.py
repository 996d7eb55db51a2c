"""The communication-time speedup law: S(N) from a job's compute and the bytes its strategy moves.

Where the N-only laws of :mod:`law.speedup` give every workload the same S(N), this law
writes a parallel step's time from what the strategy does (per optimizer step, seconds):

    t_c = t1 * ((1 - p) + p / N)                       compute share of one device
    t_x = (N - 1) / N * V * s_per_element               volume over the effective bandwidth
          + (N - 1) * K * latency_s                      plus a latency per ring hop
    t_N = t_c + t_x - min(overlap * t_x, t_c)           partly hidden behind the compute
    S(N) = t1 / t_N

``t1`` is the job's single-device seconds per step (at the same global batch), ``V`` the
elements one device sends per step and ``K`` the ring hops per step per extra device, both
from the strategy and the workload's shape:

- ``ddp``: a ring all-reduce of the gradients, ``V = 2 P``, ``K = 2`` per bucket
  (``ceil(P / BUCKET_ELEMENTS)`` buckets: DDP's 25 MiB of fp32 gradients);
- ``fsdp``: an all-gather of the weights in the forward and again in the backward pass and
  a reduce-scatter of the gradients, ``V = 3 P``, ``K = 3`` per layer;
- ``tp``: two all-reduces of the activations (``B S d`` elements) per layer in the forward
  and two in the backward pass, ``V = 8 L B S d``, ``K = 8`` per layer.

``P`` counts every trainable weight, embeddings included (:func:`core.proxies.proxy_params_total`).
Data parallel moves what grows with the parameters, tensor parallel what grows with the
activations, against compute growing with ``L d^2`` per token: so efficiency depends on the
model, not on N alone. The four constants are fitted per hardware and strategy
(:mod:`fit.speedup_fit`): ``p`` the share of the compute that splits (1 for a perfect split),
``s_per_element`` seconds per element moved (its inverse times the element's bytes is the
effective bandwidth), ``latency_s`` seconds per ring hop and ``overlap`` the share of the
communication that can hide behind compute.

Two properties hold for any constants in their bounds: ``t_N >= t1 / N`` (time never falls
below ideal scaling, so eta = S / N <= 1) and ``S(1) = 1``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from mlflow_roofline.core.proxies import proxy_params_total

COMM_TIME = "comm_time"
PARAM_NAMES: tuple[str, ...] = ("p", "s_per_element", "latency_s", "overlap")
BUCKET_ELEMENTS = 25 * 2**20 // 4
"""Elements per DDP gradient bucket: PyTorch's default 25 MiB of fp32 gradients."""


@dataclasses.dataclass(frozen=True)
class ParallelJob:
    """The shape of jobs and their single-device step time: what the law needs besides N.

    Every attribute is an array with one entry per job (or a scalar broadcast to them).

    Attributes:
        num_layers, hidden_size, ffn_size, seq_len: the model and the tokens per sample.
        batch_size: samples per optimizer step over all devices (the global batch).
        single_step_s: seconds one device takes per step of this job (the global batch).
    """

    num_layers: np.ndarray
    hidden_size: np.ndarray
    ffn_size: np.ndarray
    seq_len: np.ndarray
    batch_size: np.ndarray
    single_step_s: np.ndarray

    @classmethod
    def of(cls, sizes: Mapping[str, object], single_step_s: object) -> ParallelJob:
        """The jobs of ``sizes`` (``num_layers``, ``hidden_size``, ``ffn_size``, ``seq_len``, ``batch_size``)."""
        fields = ("num_layers", "hidden_size", "ffn_size", "seq_len", "batch_size")
        return cls(
            **{name: np.asarray(sizes[name], dtype=float) for name in fields},
            single_step_s=np.asarray(single_step_s, dtype=float),
        )

    def take(self, index: np.ndarray) -> ParallelJob:
        """The jobs at ``index`` (a boolean mask or positions), scalars kept as they are."""
        return ParallelJob(**{f.name: _take(getattr(self, f.name), index) for f in dataclasses.fields(self)})


def _take(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    return values if values.ndim == 0 else values[index]


def comm_volume(strategy: str, job: ParallelJob) -> tuple[np.ndarray, np.ndarray]:
    """Elements ``V`` one device sends per step and ring hops ``K`` per step per extra device.

    See the module docstring; a strategy that does not communicate (``single``) has zeros.
    """
    params = proxy_params_total(job.num_layers, job.hidden_size, job.ffn_size, job.seq_len)
    layers = job.num_layers
    if strategy == "ddp":
        return 2.0 * params, 2.0 * np.ceil(params / BUCKET_ELEMENTS)
    if strategy == "fsdp":
        return 3.0 * params, 3.0 * layers
    if strategy == "tp":
        return 8.0 * layers * job.batch_size * job.seq_len * job.hidden_size, 8.0 * layers
    zeros = np.zeros(np.broadcast(params, job.batch_size).shape)
    return zeros, zeros


Constants = Mapping[str, "float | np.ndarray"]
"""The law's constants by name: one number each, or one per job (a law pooled over GPUs)."""


def compute_seconds(single_step_s: np.ndarray, p: float | np.ndarray, n: np.ndarray) -> np.ndarray:
    """t_c: the seconds of one device's share of a step's compute, ``t1 * ((1 - p) + p / N)``."""
    return single_step_s * ((1.0 - p) + p / n)


def overlapped_seconds(compute: np.ndarray, comm: np.ndarray, overlap: float | np.ndarray) -> np.ndarray:
    """t_N from its compute and communication seconds: ``t_c + t_x - min(overlap * t_x, t_c)``."""
    return compute + comm - np.minimum(overlap * comm, compute)


def step_time(strategy: str, num_devices: np.ndarray, job: ParallelJob, params: Constants) -> np.ndarray:
    """Seconds per step of ``job`` on ``num_devices`` devices under ``strategy`` (the module's t_N)."""
    n = np.asarray(num_devices, dtype=float)
    compute = compute_seconds(job.single_step_s, params["p"], n)
    volume, hops = comm_volume(strategy, job)
    comm = (n - 1.0) / n * volume * params["s_per_element"] + (n - 1.0) * hops * params["latency_s"]
    return overlapped_seconds(compute, comm, params["overlap"])


def comm_time_speedup(strategy: str, num_devices: np.ndarray, job: ParallelJob, params: Constants) -> np.ndarray:
    """S(N) = t1 / t_N of each job (dimensionless); see the module docstring."""
    return job.single_step_s / step_time(strategy, num_devices, job, params)
