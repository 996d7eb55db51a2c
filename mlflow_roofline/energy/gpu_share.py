"""This job's share of a GPU that other processes use too, from NVML's per-process utilization.

A background poll (every :data:`POLL_S` seconds while a window is open) reads, per GPU,
``nvmlDeviceGetComputeRunningProcesses`` (who holds a context) and
``nvmlDeviceGetProcessUtilization(handle, lastSeenTimeStamp)`` (samples newer than the last
one seen: ``pid``, ``timeStamp`` in µs, ``smUtil`` in percent). It adds up the SM
utilization of the job's processes (this process and its descendants) and of every process.
A window's share of a GPU is the job's sum over the total's, between its two snapshots, and
its ``energy_j`` is that share of the device's joules (``energy_device_j``).

The tag ``roofline.gpu_share`` says how: ``exclusive`` (no other process held the GPU),
``process_utilization`` (split by SM utilization), ``mig`` (a MIG slice: the parent GPU's
energy times the slice's fraction of the compute slices), or ``device (<why>)`` when a share
could not be told (no per-process samples on this driver, vGPU or MIG; the job's processes
not among NVML's, as in a container with its own PID namespace): then ``energy_j`` stays the
device's figure, never an invented share.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from types import ModuleType

import psutil

from mlflow_roofline.core.schema import GPU_SHARE_DEVICE, GPU_SHARE_EXCLUSIVE, GPU_SHARE_MIG, GPU_SHARE_PROCESS
from mlflow_roofline.energy.readings import Measurement

POLL_S = 0.5
"""Seconds between two polls of the per-process samples (NVML keeps a short buffer of them)."""


def job_pids() -> set[int]:
    """This process and its live descendants (the job a meter in this process measures)."""
    me = psutil.Process()
    pids = {me.pid}
    try:
        pids.update(child.pid for child in me.children(recursive=True))
    except psutil.Error:
        pass
    return pids


@dataclasses.dataclass
class _Device:
    """Running sums of one GPU: SM-utilization percent-samples of the job and of all processes,
    polls that saw another process, polls that saw the job, and why samples are missing."""

    key: str
    handle: object
    last_seen_us: int = 0
    job_util: float = 0.0
    all_util: float = 0.0
    others_seen: int = 0
    job_seen: int = 0
    unavailable: str | None = None


ShareState = tuple[float, float, int, int]
"""One GPU's cumulative (job SM util, all SM util, polls with others, polls with the job)."""


class ShareTracker:
    """Polls NVML's per-process utilization of some GPUs; snapshots of its running sums.

    Args:
        nvml: an initialised pynvml-compatible module.
        devices: ``(key, handle)`` of the GPUs to watch (the parent GPU's handle for a MIG slice).
        pids: the job's process ids now (default: this process and its descendants).
    """

    def __init__(
        self,
        nvml: ModuleType,
        devices: Sequence[tuple[str, object]],
        pids: Callable[[], set[int]] = job_pids,
    ) -> None:
        self._nvml = nvml
        self._devices = [_Device(key, handle) for key, handle in devices]
        self._pids = pids

    def reset(self) -> None:
        """Start a session: samples older than now are not counted."""
        for device in self._devices:
            device.job_util = device.all_util = 0.0
            device.others_seen = device.job_seen = 0
            device.unavailable = None
            device.last_seen_us = self._latest_timestamp(device)

    def _latest_timestamp(self, device: _Device) -> int:
        try:
            samples = self._nvml.nvmlDeviceGetProcessUtilization(device.handle, 0)
        except self._nvml.NVMLError:
            return 0
        return max((int(s.timeStamp) for s in samples), default=0)

    def poll(self) -> None:
        """Add the samples since the last poll (never raises: a failure marks the GPU unavailable)."""
        job = self._pids()
        for device in self._devices:
            if device.unavailable is not None:
                continue
            nvml = self._nvml
            try:
                running = {int(p.pid) for p in nvml.nvmlDeviceGetComputeRunningProcesses(device.handle)}
            except nvml.NVMLError as exc:
                device.unavailable = f"no process list: {type(exc).__name__}"
                continue
            if running - job:
                device.others_seen += 1
            if running & job:
                device.job_seen += 1
            try:
                samples = nvml.nvmlDeviceGetProcessUtilization(device.handle, device.last_seen_us)
            except nvml.NVMLError_NotFound:  # no sample newer than last_seen_us
                continue
            except nvml.NVMLError as exc:
                device.unavailable = f"per-process samples unavailable: {type(exc).__name__}"
                continue
            for sample in samples:
                stamp = int(sample.timeStamp)
                if stamp <= device.last_seen_us:
                    continue
                util = float(sample.smUtil)
                device.all_util += util
                if int(sample.pid) in job:
                    device.job_util += util
            device.last_seen_us = max([device.last_seen_us, *(int(s.timeStamp) for s in samples)])

    def state(self) -> dict[str, ShareState]:
        """The running sums per GPU key."""
        return {d.key: (d.job_util, d.all_util, d.others_seen, d.job_seen) for d in self._devices}

    def unavailable(self) -> dict[str, str]:
        """Why a GPU has no per-process samples, per key."""
        return {d.key: d.unavailable for d in self._devices if d.unavailable is not None}


def _device_share(start: ShareState, end: ShareState, unavailable: str | None) -> tuple[float | None, str]:
    """(the job's fraction of one GPU, or None for the whole device; how it was told)."""
    job = end[0] - start[0]
    total = end[1] - start[1]
    others = end[2] - start[2]
    job_seen = end[3] - start[3]
    if others == 0 and total <= job:
        return 1.0, GPU_SHARE_EXCLUSIVE
    if unavailable is not None:
        return None, f"{GPU_SHARE_DEVICE} ({unavailable})"
    if job_seen == 0 and job <= 0.0:
        return None, f"{GPU_SHARE_DEVICE} (this job's processes are not among NVML's: another PID namespace?)"
    if total <= 0.0:
        return None, f"{GPU_SHARE_DEVICE} (no per-process sample in the window)"
    return job / total, GPU_SHARE_PROCESS


_RANK = {GPU_SHARE_EXCLUSIVE: 0, GPU_SHARE_MIG: 1, GPU_SHARE_PROCESS: 2}


def attribute(
    measurement: Measurement,
    start: dict[str, ShareState] | None,
    end: dict[str, ShareState] | None,
    unavailable: dict[str, str],
    mig_fractions: dict[str, float],
) -> Measurement:
    """``measurement`` with ``energy_j`` the job's share of its GPUs' joules, ``energy_device_j`` the whole.

    ``mig_fractions``: per GPU key measured through a MIG slice, the slice's fraction of the
    parent's compute. The tag value is the least direct method any GPU needed.
    """
    if measurement.energy_j is None or start is None or end is None:
        return measurement
    per_device: dict[str, float] = {}
    how: list[str] = []
    for key, joules in measurement.per_device_j.items():
        if key in mig_fractions:
            per_device[key] = joules * mig_fractions[key]
            how.append(GPU_SHARE_MIG)
            continue
        if key not in start or key not in end:
            per_device[key] = joules
            how.append(f"{GPU_SHARE_DEVICE} (not watched)")
            continue
        fraction, method = _device_share(start[key], end[key], unavailable.get(key))
        per_device[key] = joules if fraction is None else joules * fraction
        how.append(method)
    tag = max(how, key=lambda m: _RANK.get(m, 3))
    return dataclasses.replace(
        measurement,
        energy_j=sum(per_device.values()),
        per_device_j=per_device,
        energy_device_j=measurement.energy_j,
        gpu_share=tag,
    )
