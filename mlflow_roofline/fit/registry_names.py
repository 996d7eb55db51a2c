"""The model registry's naming rules, checked before a fit logs or registers anything.

The MLflow model registry refuses, at registration time:

- a model name that is blank, contains ``/`` or ``:``, is not its own normalised path
  (``a/../b``, a leading ``/``, ``.``), or is longer than :data:`MAX_MODEL_NAME_CHARS`;
- an alias that is empty, holds characters other than letters, digits, ``_`` and ``-``,
  is longer than :data:`MAX_ALIAS_CHARS`, or is reserved: ``latest`` (any case) and
  ``v<digits>`` / ``V<digits>`` (they name versions).

A fit that would register under such a name stops with one line naming the field
(exit 2 on the command line) before it pulls a run.
"""

from __future__ import annotations

import posixpath
import re

from mlflow_roofline.core.errors import ConfigError

MAX_MODEL_NAME_CHARS = 256
MAX_ALIAS_CHARS = 255
_ALIAS_CHARS = re.compile(r"^[\w\-]+$")
_VERSION_ALIAS = re.compile(r"^[vV]\d+$")


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
