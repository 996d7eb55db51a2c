"""File modes that hold for a root test process's children (a 0444 store is then read-only).

:func:`honour_file_modes` for a child about to ``exec`` (``preexec_fn``); :func:`honour_file_modes_now`
for one forked without ``exec`` (a job of :mod:`support.warm_jobs`)."""

from __future__ import annotations

import ctypes
import os

PR_CAPBSET_DROP = 24  # linux/prctl.h
CAP_DAC_OVERRIDE = 1  # linux/capability.h


def honour_file_modes() -> None:
    """In the child, before exec (``preexec_fn``): root loses the capability that writes through a 0444 mode."""
    if os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


LINUX_CAPABILITY_VERSION_3 = 0x20080522  # linux/capability.h: two 32-bit words per set


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def honour_file_modes_now() -> None:
    """In a forked child that runs on without ``exec``: root loses that capability at once (and its children too)."""
    if os.geteuid() != 0:
        return
    honour_file_modes()  # what it execs
    libc = ctypes.CDLL(None, use_errno=True)
    header = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capget")
    keep = ~(1 << CAP_DAC_OVERRIDE) & 0xFFFFFFFF
    data[0].effective &= keep
    data[0].permitted &= keep
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")
