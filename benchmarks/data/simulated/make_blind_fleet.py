"""Write ``blind_fleet.csv``: simulated fine-tuning runs on six GPU models.

A blind, per-operation simulation (written 2026-12-07 without reading the project's law or
fit code): every optimizer step is built from the kernels a PyTorch eager transformer runs
(GEMMs with a tile/wave efficiency model, attention, memory-bound elementwise kernels, the
AdamW step), a CPU dispatch timeline, collectives of the parallel strategy, and an activity
based power model with a board power cap that lowers the clock.  See README.md in this
folder for every assumption and constant.

Run from the repository root::

    .venv/bin/python benchmarks/data/simulated/make_blind_fleet.py

Only numpy and pandas are used; the output is deterministic (fixed seed).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd

SEED = 20261207
HERE = Path(__file__).resolve().parent
HW_CSV = HERE.parents[2] / "mlflow_roofline" / "data" / "hardware.csv"
OUT_CSV = HERE / "blind_fleet.csv"

US = 1e-6  # one microsecond, s
KERNEL_LATENCY_S = 2.5 * US  # launch-to-retire latency of any kernel on the GPU, s
GEMM_BLEND = 0.15  # share of the shorter of compute/memory time not hidden by the longer
CPU_OP_FWD_S = 9.0 * US  # host time to dispatch one forward kernel (eager PyTorch), s
CPU_OP_BWD_S = 6.0 * US  # host time per backward kernel (C++ autograd engine), s
CPU_OP_OPT_S = 14.0 * US  # host time per foreach-optimizer launch, s
HOST_STEP_S = 3.5e-3  # per-step host work at a sync point (loss.item, loader, zero_grad), s
HOST_SAMPLE_S = 4.0e-5  # per-sample collate + H2D copy on the same critical path, s
POWER_CAP_MARGIN = 0.985  # the power controller holds the average just under the limit
VOLT_EXP = 1.4  # energy per operation ~ V^2 ~ f^1.4 along the DVFS curve


@dataclass(frozen=True)
class Gpu:
    """One GPU model: datasheet figures (from hardware.csv) plus invented micro-architecture."""

    name: str
    peak: dict[str, float]  # FLOP/s by compute path: simt (fp32), tf32, hp (fp16/bf16)
    bw: float  # DRAM bandwidth, bytes/s
    mem: float  # DRAM capacity, bytes
    tdp: float  # board power limit, W
    link: float  # interconnect bandwidth (bidirectional aggregate), bytes/s
    nvlink: bool  # True for NVLink systems, False for PCIe
    n_sm: int  # streaming multiprocessors
    static_w: float  # active-idle power with clocks up, W
    busy_frac: float  # clock-tree/scheduler power while kernels run, share of (tdp - static)
    e_flop: dict[str, float]  # dynamic energy per FLOP at full clock, J, by path
    e_byte: float  # DRAM + on-chip energy per byte moved, J
    maxfrac: dict[str, float]  # best achievable share of peak for a large GEMM, by path
    host: float  # host CPU slowness factor (1 = a 2021 server core)
    flash: bool  # fused flash attention for 16-bit (Ampere or newer)
    precisions: dict[str, float]  # precisions run on this GPU and their sampling weights


# Invented per-GPU constants (see README.md). Columns: SMs, active-idle power W, busy share of
# (tdp - idle), dynamic pJ/FLOP (simt, tf32, hp), pJ/byte of DRAM traffic, best large-GEMM share
# of peak (simt, tf32, hp), host CPU slowness, fused flash attention, precision sampling weights.
# fmt: off
_MICRO = {
    "V100 SXM2":      (80,  62.0, 0.22, (14.0, None, 1.75), 85.0, (0.88, None, 0.74), 1.30, False,
                       {"fp16": 0.60, "fp32": 0.40}),
    "T4":             (40,  27.0, 0.20, (11.0, None, 1.60), 95.0, (0.80, None, 0.80), 1.10, False,
                       {"fp16": 0.65, "fp32": 0.35}),
    "A10":            (72,  42.0, 0.22, (8.5, 2.6, 1.45),   90.0, (0.55, 0.78, 0.80), 1.00, True,
                       {"bf16": 0.35, "fp16": 0.25, "tf32": 0.25, "fp32": 0.15}),
    "A100 SXM4 80GB": (108, 82.0, 0.22, (12.5, 1.9, 0.95),  60.0, (0.92, 0.80, 0.86), 1.00, True,
                       {"bf16": 0.45, "fp16": 0.15, "tf32": 0.25, "fp32": 0.15}),
    "L40S":           (142, 88.0, 0.20, (5.5, 1.4, 0.72),   88.0, (0.52, 0.72, 0.76), 0.85, True,
                       {"bf16": 0.45, "fp16": 0.20, "tf32": 0.20, "fp32": 0.15}),
    "H100 SXM":       (132, 135.0, 0.20, (6.8, 1.15, 0.58), 55.0, (0.78, 0.72, 0.78), 0.80, True,
                       {"bf16": 0.55, "fp16": 0.10, "tf32": 0.20, "fp32": 0.15}),
}
# fmt: on


def load_gpus(path: Path = HW_CSV) -> list[Gpu]:
    """Build the six simulated GPUs from hardware.csv rows and the invented constants."""
    table = pd.read_csv(path).set_index("name")
    gpus = []
    for name, (n_sm, static, busy, e_pj, e_byte, frac, host, flash, precs) in _MICRO.items():
        row = table.loc[name]
        peak = {"simt": float(row.fp32_flops), "hp": float(row.fp16_tensor_flops)}
        if not pd.isna(row.tf32_tensor_flops):
            peak["tf32"] = float(row.tf32_tensor_flops)
        paths = ("simt", "tf32", "hp")
        gpus.append(
            Gpu(
                name=name,
                peak=peak,
                bw=float(row.mem_bandwidth_bytes_per_s),
                mem=float(row.memory_bytes),
                tdp=float(row.board_power_w),
                link=float(row.interconnect_bytes_per_s),
                nvlink=str(row.interconnect).startswith("NVLink"),
                n_sm=n_sm,
                static_w=static,
                busy_frac=busy,
                e_flop={p: e * 1e-12 for p, e in zip(paths, e_pj) if e},
                e_byte=e_byte * 1e-12,
                maxfrac={p: f for p, f in zip(paths, frac) if f},
                host=host,
                flash=flash,
                precisions=precs,
            )
        )
    return gpus


@dataclass(frozen=True)
class Job:
    """One run's configuration (the CSV's input columns)."""

    arch: str
    L: int
    d: int
    h: int
    ff: int
    S: int
    B: int  # global batch, samples per optimizer step
    strategy: str
    N: int
    prec: str
    V: int
    peft: str
    r: int
    gc: bool

    @property
    def tp(self) -> int:
        """Tensor-parallel degree."""
        return self.N if self.strategy == "tp" else 1

    @property
    def b(self) -> int:
        """Samples per device per step."""
        return self.B // self.N if self.strategy in ("ddp", "fsdp") else self.B

    @property
    def a(self) -> int:
        """Bytes per activation element."""
        return 2 if self.prec in ("fp16", "bf16") else 4

    @property
    def path(self) -> str:
        """GEMM compute path: CUDA-core fp32, TF32 tensor or 16-bit tensor."""
        return {"fp32": "simt", "tf32": "tf32"}.get(self.prec, "hp")

    @property
    def mixed(self) -> bool:
        """Autocast mixed precision (fp32 master weights, 16-bit matmuls)."""
        return self.prec in ("fp16", "bf16")


# ---------------------------------------------------------------- kernel cost model

# (tile_m, tile_n, CTAs per SM, intrinsic efficiency of the tile shape)
TILES_TENSOR = ((256, 128, 1, 1.00), (128, 128, 1, 0.95), (128, 64, 2, 0.86), (64, 64, 4, 0.72))
TILES_SIMT = ((128, 128, 1, 1.00), (128, 64, 2, 0.93), (64, 64, 3, 0.82), (32, 32, 8, 0.55))


@cache
def gemm_shape_eff(m: int, n: int, k: int, batch: int, n_sm: int, tensor: bool) -> float:
    """Achieved share of the GEMM ceiling for C[m,n] += A[m,k] B[k,n], `batch` times.

    cuBLAS-like heuristic: the best tile/split-K choice after tile padding, wave
    quantization over the SMs, and K-loop prologue/epilogue amortization.
    """
    tiles_def, k0 = (TILES_TENSOR, 64.0) if tensor else (TILES_SIMT, 24.0)
    best = 0.0
    for tm, tn, per_sm, q in tiles_def:
        gm, gn = math.ceil(m / tm), math.ceil(n / tn)
        pad = (m * n) / (gm * tm * gn * tn)
        for split in (1, 2, 4, 8):
            if split > 1 and (k / split < 256 or batch > 1):
                break
            work = gm * gn * split * batch
            slots = n_sm * per_sm
            waves = math.ceil(work / slots)
            wave_eff = work / (waves * slots)
            kk = k / split
            eff = q * pad * wave_eff * kk / (kk + k0) * 0.94 ** math.log2(split)
            best = max(best, eff)
    if tensor and (m % 8 or n % 8 or k % 8):
        best *= 0.5  # misaligned dims fall back to slower tensor-core kernels
    return best


class Step:
    """Accumulates one device's kernels, host dispatch time and communication for a step."""

    def __init__(self, gpu: Gpu, job: Job) -> None:
        """An empty step of `job` on `gpu`."""
        self.gpu, self.job = gpu, job
        self.rows: list[tuple[float, float, float, float, float]] = []  # n, tc, tm, Eflop, Ebyte
        self.cpu_s = 0.0  # host dispatch time, s
        self.comm_exposed_s = 0.0  # collective time not hidden behind compute, s
        self.comm_bytes = 0.0  # bytes sent over the interconnect, per device

    def gemm(self, m: int, n: int, k: int, count: float = 1.0, batch: int = 1, phase: str = "fwd") -> None:
        """Add `count` GEMMs (each `batch` independent m x n x k products)."""
        g, path = self.gpu, self.job.path
        eff = gemm_shape_eff(m, n, k, batch, g.n_sm, path != "simt")
        flops = 2.0 * m * n * k * batch
        tc = flops / (g.peak[path] * g.maxfrac[path] * eff)
        byts = (m * k + k * n + m * n) * batch * self.job.a
        tm = byts / (0.8 * g.bw)
        self.rows.append((count, tc, tm, flops * g.e_flop[path], byts * g.e_byte))
        self.cpu(count, phase)

    def attention_fused(
        self, flops: float, byts: float, tiles: int, count: float, rel_eff: float, phase: str = "fwd"
    ) -> None:
        """Add a fused attention kernel (flash or memory-efficient) of `flops`, `byts`."""
        g, path = self.gpu, ("hp" if self.job.mixed else "simt")
        slots = g.n_sm * 2
        wave_eff = tiles / (math.ceil(tiles / slots) * slots)
        tc = flops / (g.peak[path] * g.maxfrac[path] * rel_eff * wave_eff)
        tm = byts / (0.8 * g.bw)
        self.rows.append((count, tc, tm, flops * g.e_flop[path], byts * g.e_byte))
        self.cpu(count, phase)

    def mem(self, byts: float, count: float = 1.0, phase: str = "fwd") -> None:
        """Add `count` memory-bound kernels moving `byts` bytes each."""
        g = self.gpu
        ramp = 0.25e6 * g.n_sm / 80.0  # bytes in flight needed to saturate DRAM
        eff = 0.85 * byts / (byts + ramp)
        self.rows.append((count, 0.0, byts / (g.bw * eff), 0.0, byts * g.e_byte))
        self.cpu(count, phase)

    def cpu(self, count: float, phase: str) -> None:
        """Charge host dispatch time for `count` kernels of a phase (fwd, bwd, opt)."""
        per = {"fwd": CPU_OP_FWD_S, "bwd": CPU_OP_BWD_S, "opt": CPU_OP_OPT_S}[phase]
        self.cpu_s += count * per * self.gpu.host

    def arrays(self) -> tuple[np.ndarray, ...]:
        """The kernel rows as arrays: count, tc, tm, flop energy, byte energy."""
        return tuple(np.array(c, dtype=float) for c in zip(*self.rows))

    def extend(self, other: Step, times: float) -> None:
        """Add `times` copies of another step's kernels, host time and communication."""
        self.rows += [(n * times, tc, tm, ef, eb) for n, tc, tm, ef, eb in other.rows]
        self.cpu_s += other.cpu_s * times
        self.comm_exposed_s += other.comm_exposed_s * times
        self.comm_bytes += other.comm_bytes * times

    def gpu_time(self, f: float = 1.0) -> float:
        """GPU kernel time of the step at relative core clock `f`, s."""
        n, tc, tm, _, _ = self.arrays()
        tcf = tc / f
        per = np.maximum(tcf, tm) + GEMM_BLEND * np.minimum(tcf, tm) + KERNEL_LATENCY_S
        return float(np.sum(n * per))


# ---------------------------------------------------------------- one transformer layer


def layer_params(job: Job) -> float:
    """Weights of one layer on one device (matrices, biases, norms), parameters."""
    d, ff, t = job.d, job.ff, job.tp
    return (4 * d * d + 2 * d * ff) / t + 9 * d + ff / t


def projections(job: Job) -> list[tuple[int, int]]:
    """(in, out) sizes per device of the four adapted projections: QKV, out, up, down."""
    d, ff, t = job.d, job.ff, job.tp
    return [(d, 3 * d // t), (d // t, d), (d, ff // t), (ff // t, d)]


def attention_fwd(st: Step, job: Job, gpu: Gpu) -> None:
    """Attention core forward: fused SDPA for encoders, eager (S x S scores) for decoders."""
    b, S, t, a = job.b, job.S, job.tp, job.a
    heads, dh, T = job.h // t, job.d // job.h, job.b * job.S
    if job.arch == "encoder":
        rel = 0.55 if (gpu.flash and job.mixed) else 0.32
        tiles = b * heads * math.ceil(S / 128)
        st.attention_fused(4.0 * b * heads * S * S * dh, 4.0 * T * job.d / t * a, tiles, 1, rel)
        st.mem(2.0 * T * job.d / t * a)  # output transpose to (T, d)
        return
    elems = b * heads * S * S
    st.mem(2.0 * T * job.d / t * a, 2)  # head split copies
    st.gemm(S, S, dh, batch=b * heads)  # Q K^T
    per_elem = 6 * a + 17 if job.mixed else 10 * a + 1  # scale, mask, softmax, dropout, cast
    st.mem(elems * per_elem / 5.0, 5)
    st.gemm(S, dh, S, batch=b * heads)  # P V
    st.mem(2.0 * T * job.d / t * a)  # head merge copy


def attention_bwd(st: Step, job: Job, gpu: Gpu) -> None:
    """Attention core backward (fused kernel recomputes P; eager has four batched GEMMs)."""
    b, S, t, a = job.b, job.S, job.tp, job.a
    heads, dh, T = job.h // t, job.d // job.h, job.b * job.S
    if job.arch == "encoder":
        rel = 0.8 * (0.55 if (gpu.flash and job.mixed) else 0.32)
        tiles = b * heads * math.ceil(S / 128)
        st.attention_fused(10.0 * b * heads * S * S * dh, 8.0 * T * job.d / t * a, tiles, 1, rel, "bwd")
        st.mem(2.0 * T * job.d / t * a, 2, "bwd")
        return
    elems = b * heads * S * S
    for m, n, k in ((S, S, dh), (S, dh, S), (S, dh, S), (S, dh, S)):
        st.gemm(m, n, k, batch=b * heads, phase="bwd")
    per_elem = 6 * a + 17 if job.mixed else 10 * a + 1
    st.mem(elems * 1.3 * per_elem / 5.0, 5, "bwd")
    st.mem(2.0 * T * job.d / t * a, 3, "bwd")


def layer_fwd(job: Job, gpu: Gpu) -> Step:
    """Kernels of one layer's forward on one device."""
    st = Step(gpu, job)
    T, d, a, t = job.b * job.S, job.d, job.a, job.tp
    for k_in, n_out in projections(job):
        st.gemm(T, n_out, k_in)
    attention_fwd(st, job, gpu)
    st.mem(T * d * (a + 4.0), 2)  # two layer norms (fp32 output under autocast)
    st.mem(T * d * 3.0 * a, 2)  # residual adds
    st.mem(T * d * (2.0 * a + 1), 2)  # hidden dropouts (+ mask byte)
    st.mem(T * job.ff / t * 2.0 * a)  # GELU
    if job.mixed:
        st.mem(T * d * (4.0 + a), 2)  # casts of layer-norm outputs
        st.mem(layer_params(job) * 6.0 / 4, 4)  # autocast weight casts fp32 -> 16 bit
    if job.peft == "lora":
        for k_in, n_out in projections(job):
            st.mem(T * k_in * (2.0 * a + 1))  # adapter input dropout
            st.gemm(T, job.r, k_in)
            st.gemm(T, n_out, job.r)
            st.mem(T * n_out * 2.0 * a)  # scaling
            st.mem(T * n_out * 3.0 * a)  # add to the frozen projection
    return st


def layer_bwd(job: Job, gpu: Gpu) -> Step:
    """Kernels of one layer's backward on one device (no weight grads of frozen weights)."""
    st = Step(gpu, job)
    T, d, a, t = job.b * job.S, job.d, job.a, job.tp
    full = job.peft == "none"
    for k_in, n_out in projections(job):
        st.gemm(T, k_in, n_out, phase="bwd")  # input gradient
        if full:
            st.gemm(k_in, n_out, T, phase="bwd")  # weight gradient
    attention_bwd(st, job, gpu)
    st.mem(T * d * 2.0 * (a + 4.0), 2, "bwd")  # layer-norm backward
    st.mem(T * d * 3.0 * a, 4, "bwd")  # residual gradient adds, dropout backward
    st.mem(T * job.ff / t * 3.0 * a, 1, "bwd")  # GELU backward
    if job.mixed and full:
        st.mem(layer_params(job) * 6.0 / 4, 4, "bwd")  # 16-bit grads into fp32 .grad
    if not full:
        for k_in, n_out in projections(job):
            st.gemm(T, job.r, n_out, phase="bwd")
            st.gemm(job.r, n_out, T, phase="bwd")
            st.gemm(T, k_in, job.r, phase="bwd")
            st.gemm(k_in, job.r, T, phase="bwd")
            st.mem(T * n_out * 2.0 * a, 1, "bwd")
            st.mem(T * k_in * (5.0 * a + 1), 2, "bwd")
    return st


# ---------------------------------------------------------------- embeddings, head, optimizer


def positions(job: Job) -> int:
    """Rows of the learned position embedding."""
    return max(job.S, 512 if job.arch == "encoder" else 1024)


def trainable_params(job: Job) -> float:
    """Weights the optimizer updates on one device (before FSDP sharding), parameters."""
    if job.peft == "lora":
        classifier = 2 * (job.d + 1) if job.arch == "encoder" else 0
        return job.L * sum(job.r * (k + n) for k, n in projections(job)) + classifier
    emb = (job.V / job.tp + positions(job) + 2) * job.d
    head = job.d * job.d + 2 * job.d if job.arch == "encoder" else 0
    return job.L * layer_params(job) + emb + head


def embed_and_head(job: Job, gpu: Gpu) -> Step:
    """Embedding lookup, final norm and loss head, forward and backward."""
    st = Step(gpu, job)
    T, d, a, t, b = job.b * job.S, job.d, job.a, job.tp, job.b
    st.mem(T * d * 8.0, 2)  # token + position gathers (fp32 tables)
    st.mem(T * d * 12.0, 2 if job.arch == "encoder" else 1)  # add, (type), norm, dropout
    if job.peft == "none":
        st.mem(job.V * d * 4.0 / t, 1, "bwd")  # zero the dense embedding gradient
        st.mem(T * d * 8.0 + T * 16.0, 3, "bwd")  # sort indices, index-add rows
    if job.arch == "encoder":
        st.gemm(b, d, d)  # pooler
        st.gemm(b, 2, d)  # classifier
        st.mem(b * d * 8.0 + 4096, 6)  # tanh, dropout, loss
        st.mem(b * d * 8.0 + 4096, 10, "bwd")
        st.gemm(b, d, 2, phase="bwd")
        st.gemm(b, d, d, phase="bwd")
        st.gemm(d, d, b, phase="bwd")
        return st
    vt = job.V / t
    st.mem(T * d * (a + 4.0), 1)  # final layer norm
    if job.mixed:
        st.mem(vt * d * 6.0)  # cast the tied head weight
    st.gemm(T, math.ceil(vt), d)  # logits
    st.mem(T * vt * (12.0 + a) / 3, 3)  # fp32 upcast, log-softmax, nll
    st.mem(T * vt * (12.0 + 2 * a) / 3, 3, "bwd")
    st.gemm(T, d, math.ceil(vt), phase="bwd")
    if job.peft == "none":
        st.gemm(d, math.ceil(vt), T, phase="bwd")
    return st


def optimizer(job: Job, gpu: Gpu, shard: int) -> Step:
    """Gradient clipping and the foreach AdamW step over this device's shard."""
    st = Step(gpu, job)
    params = trainable_params(job) / shard
    per_param = 28.0 + 12.0 + (8.0 if job.prec == "fp16" else 0.0)  # adam, clip, unscale
    tensors = (2 * job.L + 2) if job.peft == "lora" else (16 * job.L + 6)
    if job.strategy == "fsdp":
        tensors = job.L + 1  # one flat parameter per wrapped unit
    launches = 20 * math.ceil(tensors / 48) + (6 if job.prec == "fp16" else 0)
    st.mem(params * per_param / launches, launches, "opt")
    return st


# ---------------------------------------------------------------- collectives


def bus_bw(gpu: Gpu, n: int) -> float:
    """Achieved NCCL bus bandwidth per direction among `n` devices, bytes/s."""
    if gpu.nvlink:
        eff = 0.78 if not (gpu.name.startswith("V100") and n == 8) else 0.62  # cube-mesh
    else:
        eff = {2: 0.75, 4: 0.60, 8: 0.45}[n]  # PCIe switches, then the socket link
    return gpu.link / 2.0 * eff


def collective_s(gpu: Gpu, n: int, byts: float, kind: str) -> float:
    """Time of one collective over `n` devices: all_reduce, all_gather or reduce_scatter, s.

    `byts` is the full buffer size; small messages do not reach the bus bandwidth.
    """
    hop = 3.0 * US if gpu.nvlink else 9.0 * US
    bw = bus_bw(gpu, n) * byts / (byts + 256e3)
    steps = 2 * (n - 1) if kind == "all_reduce" else n - 1
    return 12.0 * US + steps * hop + steps / n * byts / bw


def ddp_comm(st: Step, job: Job, gpu: Gpu, t_bwd: float) -> None:
    """DDP: fp32 gradient all-reduce in 25 MB buckets overlapped with the backward."""
    total = 4.0 * trainable_params(job)
    buckets = [min(total, 1e6)]
    rest = total - buckets[0]
    while rest > 0:
        buckets.append(min(rest, 25e6))
        rest -= buckets[-1]
    times = [collective_s(gpu, job.N, x, "all_reduce") for x in buckets]
    comm = sum(times)
    exposed = max(times[-1], comm - 0.9 * t_bwd)
    st.comm_exposed_s += exposed
    st.rows.append((1.0, 0.0, 0.05 * (comm - exposed), 0.0, 0.0))  # SM contention
    st.comm_bytes += 2.0 * (job.N - 1) / job.N * total
    st.cpu_s += (150 * US + 40 * US * len(buckets)) * gpu.host


def fsdp_comm(st: Step, job: Job, gpu: Gpu, t_fwd: float, t_bwd: float) -> None:
    """FSDP full shard: per-layer all-gather (fwd, bwd) and reduce-scatter with prefetch."""
    n, pa = job.N, float(job.a)
    layer = layer_params(job) * pa
    ag = collective_s(gpu, n, layer, "all_gather")
    rs = collective_s(gpu, n, layer, "reduce_scatter")  # FSDP1 reduces the whole flat param
    root = (job.V + positions(job)) * job.d * pa
    ag_root = collective_s(gpu, n, root, "all_gather")
    rs_root = collective_s(gpu, n, root, "reduce_scatter") if job.peft == "none" else 0.0
    fwd_exp = job.L * max(0.0, ag - t_fwd) + ag + ag_root
    bwd_exp = job.L * max(0.0, ag + rs - t_bwd) + rs + rs_root
    hidden = job.L * (2 * ag + rs) - (fwd_exp + bwd_exp - ag_root - rs_root)
    st.comm_exposed_s += fwd_exp + bwd_exp
    st.rows.append((1.0, 0.0, 0.08 * max(hidden, 0.0), 0.0, 0.0))
    vol = job.L * 3 * layer + root * (2 if job.peft == "none" else 1)
    st.comm_bytes += (n - 1) / n * vol
    st.cpu_s += job.L * (250 + 350) * US * gpu.host * (2 if job.gc else 1)


def tp_comm(st: Step, job: Job, gpu: Gpu) -> None:
    """Megatron tensor parallel: two activation all-reduces per layer each way, exposed."""
    n, act = job.N, job.b * job.S * job.d * float(job.a)
    per_layer = 4 + (2 if job.gc else 0)
    t_layer = collective_s(gpu, n, act, "all_reduce")
    small = collective_s(gpu, n, job.b * job.S * 4.0, "all_reduce")
    count_small = 3 if job.arch == "decoder" else 0  # vocab-parallel cross-entropy
    st.comm_exposed_s += job.L * per_layer * t_layer + t_layer + count_small * small
    st.comm_bytes += 2.0 * (n - 1) / n * act * (job.L * per_layer + 1)
    st.cpu_s += (job.L * per_layer + 1 + count_small) * 25 * US * gpu.host


# ---------------------------------------------------------------- one step, time and energy


def build_step(job: Job, gpu: Gpu) -> Step:
    """All kernels, host time and communication of one optimizer step on one device."""
    fwd, bwd = layer_fwd(job, gpu), layer_bwd(job, gpu)
    st = Step(gpu, job)
    st.extend(fwd, job.L * (2 if job.gc else 1))  # checkpointing recomputes the forward
    st.extend(bwd, job.L)
    st.extend(embed_and_head(job, gpu), 1)
    if job.gc:
        st.cpu_s += job.L * 60 * US * gpu.host  # checkpoint bookkeeping per layer
    shard = job.N if job.strategy == "fsdp" else 1
    st.extend(optimizer(job, gpu, shard), 1)
    t_fwd, t_bwd = fwd.gpu_time(), bwd.gpu_time() + (fwd.gpu_time() if job.gc else 0.0)
    if job.strategy == "ddp":
        ddp_comm(st, job, gpu, job.L * t_bwd)
    elif job.strategy == "fsdp":
        fsdp_comm(st, job, gpu, t_fwd, t_bwd)
    elif job.strategy == "tp":
        tp_comm(st, job, gpu)
    return st


def step_time_energy(st: Step, f: float, host_s: float, silicon: float) -> tuple[float, float]:
    """Wall time (s) and one device's energy (J) of a step at relative clock `f`."""
    gpu, job = st.gpu, st.job
    n, _, _, e_flop, e_byte = st.arrays()
    t_gpu = st.gpu_time(f)
    t_dev = max(t_gpu + st.comm_exposed_s, st.cpu_s)
    jitter = 1.0 + 0.012 * math.sqrt(2.0 * math.log(job.N)) if job.N > 1 else 1.0
    t = (t_dev + host_s) * jitter
    dyn_w = gpu.tdp - gpu.static_w
    e_link = 40e-12 if gpu.nvlink else 70e-12  # J per byte sent, link + buffer traffic
    energy = (
        gpu.static_w * t
        + float(np.sum(n * (e_flop * f**VOLT_EXP + e_byte)))
        + gpu.busy_frac * dyn_w * f ** (1.0 + VOLT_EXP) * t_gpu
        + st.comm_bytes * e_link
        + 0.08 * dyn_w * st.comm_exposed_s
    )
    return t, energy * silicon


def solve_clock(st: Step, host_s: float, silicon: float) -> tuple[float, float, float]:
    """Lower the clock until the average power fits under the cap: (f, time s, energy J)."""
    cap = st.gpu.tdp * POWER_CAP_MARGIN
    t, e = step_time_energy(st, 1.0, host_s, silicon)
    if e / t <= cap:
        return 1.0, t, e
    lo, hi = 0.2, 1.0
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        t, e = step_time_energy(st, mid, host_s, silicon)
        lo, hi = (mid, hi) if e / t <= cap else (lo, mid)
    t, e = step_time_energy(st, lo, host_s, silicon)
    return lo, t, e


def memory_needed(job: Job) -> float:
    """Peak device memory of the run: states, activations, logits, context, bytes."""
    shard = job.N if job.strategy == "fsdp" else 1
    t, a, T = job.tp, job.a, job.b * job.S
    total_w = job.L * layer_params(job) + (job.V / t + positions(job)) * job.d
    tr = trainable_params(job)
    states = (4 * total_w + 16 * tr) / shard  # fp32 weights, grads, two AdamW moments
    if job.strategy == "ddp":
        states += 4 * tr  # gradient buckets
    if job.strategy == "fsdp":
        states += 2 * layer_params(job) * 4  # two unsharded layers in flight
    if job.mixed:
        states += 2 * total_w / shard  # autocast weight copies
    eager = 5.0 * job.h / t * job.S if job.arch == "decoder" else 0.0
    per_layer = T * ((10 * job.d + 24 * job.d / t) + eager) * a / 2.0
    if job.peft == "lora":
        per_layer *= 1.35  # adapter inputs and dropout masks
    act = (job.L * T * job.d * a + per_layer) if job.gc else job.L * per_layer
    if job.arch == "decoder":
        act += T * job.V / t * (8.0 + 2 * a)  # logits, fp32 copy, gradient
    return 1.15 * (states + act) + 1.2e9  # allocator fragmentation, CUDA context


# ---------------------------------------------------------------- the run plan

# (layers, hidden size) of the simulated models; heads = hidden / 64 (25 for 1600), ffn = 4 x hidden
# fmt: off
ENCODERS = ((4, 256), (4, 512), (6, 512), (8, 768), (12, 768), (12, 1024), (18, 1024), (24, 1024),
            (24, 1280), (24, 1536), (32, 2048))
DECODERS = ((4, 256), (6, 512), (8, 768), (12, 768), (16, 1024), (24, 1024), (36, 1280), (24, 1536),
            (48, 1600), (32, 2048))
# fmt: on
NICE_STEPS = sorted({int(m * 10**e) for e in range(1, 6) for m in (1, 1.5, 2, 3, 5)})


def stable_rng(*key: object) -> np.random.Generator:
    """A generator seeded from SEED and a text key (independent of row order)."""
    digest = hashlib.sha256(("|".join(map(str, key)) + f"|{SEED}").encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def base_job(rng: np.random.Generator, gpu: Gpu, arch: str, L: int, d: int) -> Job:
    """A single-device job of one model size with random sequence, batch and precision."""
    h = 25 if d == 1600 else d // 64
    if arch == "encoder":
        S = int(rng.choice([128, 256, 512], p=[0.4, 0.35, 0.25]))
        V = int(rng.choice([30522, 28996], p=[0.8, 0.2]))
    else:
        S = int(rng.choice([256, 512, 1024], p=[0.35, 0.4, 0.25]))
        V = int(rng.choice([50257, 50304, 32000], p=[0.7, 0.2, 0.1]))
    B = int(rng.choice([8, 16, 32, 64], p=[0.2, 0.35, 0.3, 0.15]))
    precs = list(gpu.precisions)
    prec = str(rng.choice(precs, p=list(gpu.precisions.values())))
    return Job(arch, L, d, h, 4 * d, S, B, "single", 1, prec, V, "none", 0, False)


def fits(job: Job, gpu: Gpu) -> bool:
    """Whether the job's peak memory fits the device, keeping 5 % free."""
    return job.b >= 1 and memory_needed(job) <= 0.95 * gpu.mem


def parallel_variants(rng: np.random.Generator, job: Job) -> list[Job]:
    """Strong-scaling (same global batch) and weak-scaling (batch x N) parallel versions."""
    options = [
        (s, n)
        for s in ("ddp", "fsdp", "tp")
        for n in (2, 4, 8)
        if (s != "tp" or job.h % n == 0) and (s == "tp" or job.B % n == 0)
    ]
    out = []
    for i in rng.choice(len(options), size=min(2, len(options)), replace=False):
        s, n = options[int(i)]
        out.append(replace(job, strategy=s, N=n))
    if rng.random() < 0.5:
        s, n = str(rng.choice(["ddp", "fsdp"])), int(rng.choice([2, 4, 8]))
        out.append(replace(job, strategy=s, N=n, B=job.B * n))
    return out


def workload_family(rng: np.random.Generator, job: Job) -> list[Job]:
    """A single job, its parallel versions, and LoRA / checkpointing variants."""
    jobs = [job] + parallel_variants(rng, job)
    if rng.random() < 0.45:
        lora = replace(job, peft="lora", r=int(rng.choice([8, 16])))
        jobs.append(lora)
        if rng.random() < 0.6:
            jobs.append(replace(lora, strategy=str(rng.choice(["ddp", "fsdp"])), N=int(rng.choice([2, 4]))))
    if rng.random() < 0.2:
        ckpt = replace(job, gc=True)
        jobs.append(ckpt)
        if rng.random() < 0.5:
            jobs.append(replace(ckpt, strategy="fsdp", N=int(rng.choice([2, 4, 8]))))
    return jobs


def plan(gpu: Gpu) -> list[Job]:
    """Every job run on one GPU model, skipping those that would not fit its memory."""
    rng = stable_rng("plan", gpu.name)
    jobs: list[Job] = []
    for arch, sizes in (("encoder", ENCODERS), ("decoder", DECODERS)):
        for L, d in sizes:
            for _ in range(int(rng.choice([1, 2], p=[0.5, 0.5]))):
                base = base_job(rng, gpu, arch, L, d)
                while not fits(base, gpu) and base.B > 4:
                    base = replace(base, B=base.B // 2)
                jobs += [j for j in workload_family(rng, base) if fits(j, gpu)]
    return list(dict.fromkeys(jobs))  # drop repeated draws of the same job


# ---------------------------------------------------------------- measurement and output


def choose_steps(rng: np.random.Generator, step_s: float) -> int:
    """A round step count giving a run of about 40 s to 30 min (always 30 s to 1 h)."""
    target = math.exp(rng.uniform(math.log(40.0), math.log(1800.0)))
    ok = [n for n in NICE_STEPS if 33.0 <= n * step_s <= 3300.0]
    if not ok:
        raise ValueError(f"no step count fits a step of {step_s:.3g} s")
    return min(ok, key=lambda n: abs(math.log(n * step_s / target)))


def simulate(job: Job, gpu: Gpu, rng: np.random.Generator) -> dict[str, object]:
    """Measure one run: time (s) and all devices' energy (J) with noise, plus diagnostics."""
    silicon = float(stable_rng("silicon", gpu.name).lognormal(0.0, 0.04))
    pipeline = float(
        stable_rng("workload", job.arch, job.L, job.d, job.S, job.b, job.peft, job.gc, job.prec).lognormal(0.0, 0.25)
    )
    host_s = (HOST_STEP_S + HOST_SAMPLE_S * job.b) * gpu.host * pipeline
    st = build_step(job, gpu)
    f, t_step, e_step = solve_clock(st, host_s, silicon)
    steps = choose_steps(rng, t_step)
    t_noise, p_noise = rng.lognormal(0.0, 0.025), rng.lognormal(0.0, 0.02)
    time_s = steps * t_step * t_noise
    ceiling = gpu.tdp * (0.999 - abs(rng.normal(0.0, 0.008)))  # the limiter's own spread
    power = min(e_step / t_step * p_noise, ceiling)  # W per device as NVML integrates it
    energy_j = power * time_s * job.N
    return {
        "num_layers": job.L,
        "hidden_size": job.d,
        "num_heads": job.h,
        "ffn_size": job.ff,
        "seq_len": job.S,
        "batch_size": job.B,
        "num_steps": steps,
        "strategy": job.strategy,
        "num_devices": job.N,
        "device": "cuda",
        "precision": job.prec,
        "arch": job.arch,
        "vocab_size": job.V,
        "peft": job.peft,
        "lora_rank": job.r,
        "grad_checkpointing": "true" if job.gc else "false",
        "energy_j": round(float(energy_j), 1),
        "time_s": round(float(time_s), 3),
        "hardware": gpu.name,
        "energy_source": "nvml",
        "_clock": f,
        "_step_s": t_step,
        "_gpu_s": st.gpu_time(f),
        "_cpu_s": st.cpu_s,
        "_host_s": host_s,
        "_comm_s": st.comm_exposed_s,
        "_mfu": model_flops(job) / t_step / job.N / gpu.peak[job.path],
    }


def model_flops(job: Job) -> float:
    """Useful training FLOPs of one step (6 x matmul params x tokens + attention), FLOPs."""
    tokens = job.B * job.S
    dense = job.L * (4 * job.d**2 + 2 * job.d * job.ff)
    head = job.d * job.V if job.arch == "decoder" else 0
    mult = 4.0 if job.peft == "lora" else 6.0
    attn = job.L * 12.0 * job.S * job.d
    return tokens * (mult * (dense + head) + attn)


def build_table() -> pd.DataFrame:
    """Simulate every planned run on every GPU; diagnostics columns start with '_'."""
    rng = np.random.default_rng(SEED)
    rows = [simulate(job, gpu, rng) for gpu in load_gpus() for job in plan(gpu)]
    return pd.DataFrame(rows)


def main() -> None:
    """Write blind_fleet.csv and print a short summary."""
    table = build_table()
    public = table[[c for c in table.columns if not c.startswith("_")]]
    public.to_csv(OUT_CSV, index=False)
    power = table.energy_j / table.time_s / table.num_devices
    print(f"wrote {len(table)} rows to {OUT_CSV}")
    print(table.groupby("hardware").size().to_string())
    print(f"avg power per device {power.min():.1f} .. {power.max():.1f} W")


if __name__ == "__main__":
    main()
