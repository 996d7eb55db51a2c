"""The model registry side of a fit: its naming rules and the ledger that registers (and can unregister) models.

Naming rules. The MLflow model registry refuses, at registration time:

- a model name that is blank, contains ``/`` or ``:``, is not its own normalised path
  (``a/../b``, a leading ``/``, ``.``), or is longer than :data:`MAX_MODEL_NAME_CHARS`;
- an alias that is empty, holds characters other than letters, digits, ``_`` and ``-``,
  is longer than :data:`MAX_ALIAS_CHARS`, or is reserved: ``latest`` (any case) and
  ``v<digits>`` / ``V<digits>`` (they name versions).

A fit that would register under such a name stops with one line naming the field
(exit 2 on the command line) before it pulls a run.

Once every fit run of the job is logged (:mod:`fit.fit_runs`), each model is registered
under ``model_name``, tagged with its fit run and ``cv_mape``, described and given its
aliases (:class:`RegistryLedger`), which can undo all of it.
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
from collections.abc import Callable, Sequence
from typing import Protocol

from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.schema import TAG_CV_MAPE, TAG_ENERGY_SOURCE, TAG_FIT_RUN_ID, TAG_FORM, TAG_HARDWARE
from mlflow_roofline.tracking.client import TrackingClient, TrackingError

MAX_MODEL_NAME_CHARS = 256
MAX_ALIAS_CHARS = 255
_ALIAS_CHARS = re.compile(r"^[\w\-]+$")
_VERSION_ALIAS = re.compile(r"^[vV]\d+$")


def hardware_slug(name: str) -> str:
    """A hardware name as alias and metric text: lower case, runs of other characters one ``-``, at most 60."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:60] or "hardware"


def check_model_name(name: str, field: str = "model_name") -> None:
    """Raise :class:`ConfigError` naming ``field`` unless the registry accepts ``name`` as a model name."""
    if not name or not name.strip():
        raise ConfigError(field, "must not be empty")
    if "/" in name or ":" in name:
        raise ConfigError(field, f"must not contain '/' or ':' (the registry refuses them), got {name!r}")
    norm = posixpath.normpath(name)
    if norm != name or norm == "." or norm.startswith(".."):
        raise ConfigError(field, f"must be a plain name, not a path the registry would normalise, got {name!r}")
    if len(name) > MAX_MODEL_NAME_CHARS:
        raise ConfigError(field, f"must be at most {MAX_MODEL_NAME_CHARS} characters, got {len(name)}")


def check_alias(alias: str, field: str = "alias") -> None:
    """Raise :class:`ConfigError` naming ``field`` unless the registry accepts ``alias``."""
    if not alias:
        raise ConfigError(field, "must not be empty")
    if not _ALIAS_CHARS.match(alias):
        raise ConfigError(field, f"may hold only letters, digits, '_' and '-', got {alias!r}")
    if len(alias) > MAX_ALIAS_CHARS:
        raise ConfigError(field, f"must be at most {MAX_ALIAS_CHARS} characters, got {len(alias)}")
    if alias.lower() == "latest" or _VERSION_ALIAS.match(alias):
        raise ConfigError(field, f"{alias!r} is reserved by the registry ('latest' and v<digits> name versions)")


MODEL_DESCRIPTION = (
    "Energy laws fitted by mlflow-roofline on measured fine-tuning runs. Each version predicts a job's energy (J, "
    "with a 95 % interval), time, speedup and the placement to choose; `@champion` is the one to serve "
    "(`mlflow models serve -m models:/<name>@champion`). A version's source run is its fit run: its description, "
    "plots and the train runs it learned from (its Datasets panel)."
)
"""The registered model's description, set when the fit creates it."""


class RegisteredLaw(Protocol):
    """What registration reads of a law: its runs and its grouped-CV MAPE (%)."""

    @property
    def n_runs(self) -> int: ...

    @property
    def cv_mape(self) -> float: ...


class ChosenForm(Protocol):
    """The energy form a fit chose, by name."""

    @property
    def chosen(self) -> str: ...


@dataclasses.dataclass(frozen=True)
class Registration:
    """What :meth:`RegistryLedger.register` made of one fit's model: its version and the aliases set on it."""

    model_version: str
    aliases: tuple[str, ...]


class Registrable(Protocol):
    """What :meth:`RegistryLedger.register` reads of a fit (one hardware's, or the fleet's); it changes none of it."""

    @property
    def run_id(self) -> str: ...

    @property
    def hardware(self) -> str: ...

    @property
    def energy_source(self) -> str: ...

    @property
    def energy(self) -> ChosenForm: ...

    @property
    def law(self) -> RegisteredLaw | None: ...


class RegistryLedger:
    """Registers the fit's models and remembers what it changed, so that a failed fit leaves no trace.

    :meth:`rollback` deletes every version this fit registered, points each alias it
    moved back at its previous version (or removes it), and deletes the registered model
    when this fit created it.
    """

    def __init__(self, client: TrackingClient, model_name: str) -> None:
        self.model_name = model_name
        self.client = client
        self.created_model = False
        self.versions: list[str] = []
        self.previous_aliases: dict[str, str | None] = {}

    def _ensure_model(self) -> None:
        """Note whether registering creates the model (rollback then deletes it), and describe it."""
        if self.created_model or self.versions:
            return
        if not self.client.registered_model_exists(self.model_name):
            self.client.create_registered_model(self.model_name)
            self.created_model = True
            self.client.describe_registered_model(self.model_name, MODEL_DESCRIPTION)

    def alias_owners(self, aliases: Sequence[str]) -> dict[str, str | None]:
        """Each alias -> the hardware (``roofline.hardware``) of the version it points at now; None when unset."""
        owners: dict[str, str | None] = {}
        for alias in aliases:
            version = self.client.version_by_alias(self.model_name, alias)
            owners[alias] = None if version is None else (version.tags or {}).get(TAG_HARDWARE)
        return owners

    def _previous_version(self, alias: str) -> str | None:
        version = self.client.version_by_alias(self.model_name, alias)
        return None if version is None else str(version.version)

    def register(self, fit: Registrable, model_uri: str, aliases: Sequence[str]) -> Registration:
        """Register ``model_uri`` with the fit's tags, a description and ``aliases``; the version and its aliases."""
        law = fit.law
        if law is None:
            raise ValueError(f"fit run {fit.run_id} has no law to register")
        self._ensure_model()
        tags = {
            TAG_FIT_RUN_ID: fit.run_id,
            TAG_CV_MAPE: f"{law.cv_mape:.4g}",
            TAG_HARDWARE: fit.hardware,
            TAG_ENERGY_SOURCE: fit.energy_source,
            TAG_FORM: fit.energy.chosen,
        }
        version = self.client.register_model(model_uri, self.model_name, tags=tags)
        self.versions.append(version)
        self.client.describe_model_version(
            self.model_name,
            version,
            (
                f"Energy law '{fit.energy.chosen}' for {fit.hardware} ({fit.energy_source} energy), "
                f"{law.n_runs} runs, grouped-CV MAPE {law.cv_mape:.2f}%. Fit run {fit.run_id}."
            ),
        )
        for alias in aliases:
            self.previous_aliases.setdefault(alias, self._previous_version(alias))
            self.client.set_alias(self.model_name, alias, version)
        return Registration(version, tuple(aliases))

    def rollback(self) -> list[str]:
        """Undo every registration of this fit; returns what could not be undone, in words."""
        problems: list[str] = []
        steps: list[tuple[str, Callable[[str], None], str]] = [
            (f"alias {a}", self._restore_alias, a) for a in self.previous_aliases
        ]
        steps += [(f"version {v}", self._delete_version, v) for v in self.versions]
        for what, step, arg in steps:
            try:
                step(arg)
            except TrackingError as exc:
                problems.append(f"{self.model_name} {what}: {exc.message}")
        if self.created_model and not problems:
            try:
                self.client.delete_registered_model(self.model_name)
            except TrackingError as exc:
                problems.append(f"{self.model_name}: {exc.message}")
        return problems

    def _restore_alias(self, alias: str) -> None:
        previous = self.previous_aliases[alias]
        if previous is not None and previous not in self.versions:
            self.client.set_alias(self.model_name, alias, previous)
        elif self._previous_version(alias) is not None:
            self.client.delete_alias(self.model_name, alias)

    def _delete_version(self, version: str) -> None:
        self.client.delete_model_version(self.model_name, version)
