"""The device kinds are declared once: the job table's levels, the meters' kinds and ``auto`` read them."""

from __future__ import annotations

import dataclasses

import pytest

from mlflow_roofline.core import job_table
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.energy.devices import DEVICE_KINDS, auto_device
from mlflow_roofline.energy.select import AUTO_ORDER, METER_KINDS
from mlflow_roofline.train.device import resolve_device


def test_the_job_tables_devices_are_the_registrys_kinds() -> None:
    assert set(job_table.levels("device")) == set(DEVICE_KINDS)


def test_every_meter_measures_a_registered_kind_and_every_kind_has_a_meter() -> None:
    assert {kind.device_kind for kind in METER_KINDS} == set(DEVICE_KINDS)
    assert all(AUTO_ORDER[name] for name in DEVICE_KINDS)


def test_auto_is_the_first_accelerator_with_a_device(monkeypatch: pytest.MonkeyPatch) -> None:
    # No GPU can exist here: the cuda kind is told it sees two.
    assert resolve_device("auto") == auto_device() == "cpu"
    monkeypatch.setitem(
        DEVICE_KINDS, "cuda", dataclasses.replace(DEVICE_KINDS["cuda"], may_be_present=lambda: True, count=lambda: 2)
    )
    assert resolve_device("auto") == "cuda"


def test_an_accelerator_without_a_device_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        DEVICE_KINDS, "cuda", dataclasses.replace(DEVICE_KINDS["cuda"], may_be_present=lambda: True, count=lambda: 0)
    )
    with pytest.raises(ConfigError, match="device: cuda was asked for but no cuda device is visible here"):
        resolve_device("cuda")
    assert resolve_device("cpu") == "cpu"
