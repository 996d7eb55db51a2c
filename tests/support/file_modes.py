"""File modes that hold for a root test process's children (a 0444 store is then read-only)."""

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
