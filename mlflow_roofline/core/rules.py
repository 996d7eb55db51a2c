"""The one table of rules a fine-tuning configuration must satisfy.

Every rule names the field an error points at, the fields it reads, a check on one
configuration (plain Python values) and the same check on whole columns (numpy arrays,
one entry per configuration), and its message. Three places apply the table:
:meth:`~mlflow_roofline.core.config.TrainConfig.validate` (one configuration), the served
model's input validation (whole columns) and the recommender's candidate filter (every
(strategy, device count) of every row at once).

Integer-ness is a matter of parsing and is checked where values are parsed (the config's
constructor inputs, the served model's columns); the rules assume numbers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from mlflow_roofline.core.job_table import AUTO, JOB_COLUMNS
from mlflow_roofline.core.membership import is_in
from mlflow_roofline.core.schema import DATA_PARALLEL_STRATEGIES, KIND_PARAM_NAMES

INT_FIELDS: tuple[str, ...] = tuple(c.name for c in JOB_COLUMNS if c.type == "int" and c.default != AUTO)
"""Configuration fields that hold integers given as such (the paper's params)."""

KIND_INT_FIELDS: tuple[str, ...] = tuple(c.name for c in JOB_COLUMNS if c.type == "int" and c.default == AUTO)
"""Integer fields whose default another field decides (``auto``: ``vocab_size`` by arch, ``lora_rank`` by peft)."""

MINIMUM: Mapping[str, int] = {c.name: c.minimum for c in JOB_COLUMNS if c.type == "int" and c.minimum != 1}
"""Smallest value of an integer field where it is not 1."""


def integer_kind(field: str) -> str:
    """``a positive integer`` or ``a non-negative integer``: what an integer field must hold."""
    return "a non-negative integer" if MINIMUM.get(field, 1) == 0 else "a positive integer"


@dataclasses.dataclass(frozen=True)
class Rule:
    """One rule of a configuration.

    Attributes:
        name: short identifier (for tests and docs).
        field: the field an error names (the one a user would change).
        fields: every field the rule reads.
        scalar: True where one configuration (a mapping of plain values) satisfies the rule.
        vector: the same check on a mapping of equally long arrays: a boolean array, True
            where the row satisfies the rule.
        message: what the rule demands, formatted with the offending configuration's values
            (``str.format`` fields named after ``fields``).
    """

    name: str
    field: str
    fields: tuple[str, ...]
    scalar: Callable[[Mapping[str, Any]], bool]
    vector: Callable[[Mapping[str, np.ndarray]], np.ndarray]
    message: str

    def describe(self, values: Mapping[str, Any]) -> str:
        """The message for one offending configuration (numbers as a user writes them: 12, not 12.0)."""
        return self.message.format(**{name: plain(values[name]) for name in self.fields})


def plain(value: object) -> object:
    """A numpy scalar as the Python value a user wrote: integral floats become ints."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return int(value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def _in(choices: tuple[str, ...]) -> Callable[[np.ndarray], np.ndarray]:
    allowed = frozenset(choices)
    return lambda values: is_in(values, allowed)


def _minimum_rule(field: str) -> Rule:
    low = MINIMUM.get(field, 1)
    return Rule(
        name=f"{field}_minimum",
        field=field,
        fields=(field,),
        scalar=lambda v: v[field] >= low,
        vector=lambda v: v[field] >= low,
        message=f"must be {integer_kind(field)}, got {{{field}!r}}",
    )


def _choice_rule(field: str, choices: tuple[str, ...]) -> Rule:
    member = _in(choices)
    return Rule(
        name=f"{field}_choice",
        field=field,
        fields=(field,),
        scalar=lambda v: v[field] in choices,
        vector=lambda v: member(v[field]),
        message=f"must be one of {', '.join(choices)}, got {{{field}!r}}",
    )


def _split_rule(name: str, field: str, strategies: tuple[str, ...]) -> Rule:
    """``field`` divisible by ``num_devices`` under ``strategies`` (what those strategies split across devices)."""
    splits = _in(strategies)
    return Rule(
        name=name,
        field=field,
        fields=("strategy", field, "num_devices"),
        scalar=lambda v: v["strategy"] not in strategies or v[field] % v["num_devices"] == 0,
        vector=lambda v: ~splits(v["strategy"]) | (np.fmod(v[field], v["num_devices"]) == 0),
        message=f"must be divisible by num_devices under {{strategy}} ({{{field}}} % {{num_devices}} != 0)",
    )


def _choice_rules(paper: bool) -> tuple[Rule, ...]:
    """The level rule of every text column of the job table, the paper's or the others."""
    return tuple(_choice_rule(c.name, c.levels) for c in JOB_COLUMNS if c.type == "text" and c.paper == paper)


RULES: tuple[Rule, ...] = (
    *(_minimum_rule(field) for field in INT_FIELDS),
    *_choice_rules(paper=True),
    Rule(
        name="heads_divide_hidden",
        field="hidden_size",
        fields=("hidden_size", "num_heads"),
        scalar=lambda v: v["hidden_size"] % v["num_heads"] == 0,
        vector=lambda v: np.fmod(v["hidden_size"], v["num_heads"]) == 0,
        message="must be divisible by num_heads ({hidden_size} % {num_heads} != 0)",
    ),
    Rule(
        name="single_on_one_device",
        field="num_devices",
        fields=("strategy", "num_devices"),
        scalar=lambda v: v["strategy"] != "single" or v["num_devices"] == 1,
        vector=lambda v: (v["strategy"] != "single") | (v["num_devices"] == 1),
        message="must be 1 under strategy single, got {num_devices}",
    ),
    Rule(
        name="parallel_on_two_or_more",
        field="num_devices",
        fields=("strategy", "num_devices"),
        scalar=lambda v: v["strategy"] == "single" or v["num_devices"] >= 2,
        vector=lambda v: (v["strategy"] == "single") | (v["num_devices"] >= 2),
        message="must be at least 2 under strategy {strategy}, got {num_devices}",
    ),
    _split_rule("tp_splits_heads", "num_heads", ("tp",)),
    _split_rule("tp_splits_ffn", "ffn_size", ("tp",)),
    _split_rule("data_parallel_splits_batch", "batch_size", DATA_PARALLEL_STRATEGIES),
    *_choice_rules(paper=False),
    *(_minimum_rule(field) for field in KIND_INT_FIELDS),  # after arch and peft, whose defaults they take
    Rule(
        name="lora_has_a_rank",
        field="lora_rank",
        fields=("peft", "lora_rank"),
        scalar=lambda v: (v["peft"] == "lora") == (v["lora_rank"] >= 1),
        vector=lambda v: (np.asarray(v["peft"], dtype=object) == "lora") == (v["lora_rank"] >= 1),
        message="must be at least 1 under peft lora and 0 under peft none, got {lora_rank} under peft {peft}",
    ),
    Rule(
        name="lora_rank_below_width",
        field="lora_rank",
        fields=("lora_rank", "hidden_size"),
        scalar=lambda v: v["lora_rank"] <= v["hidden_size"],
        vector=lambda v: v["lora_rank"] <= v["hidden_size"],
        message="must be at most hidden_size ({hidden_size}), got {lora_rank}",
    ),
)
"""Every rule, in the order they are checked (the first broken one is reported)."""


KIND_RULES: tuple[Rule, ...] = tuple(rule for rule in RULES if set(rule.fields) & set(KIND_PARAM_NAMES))
"""The rules on the params beyond the paper's (what a run measured elsewhere must satisfy of them too)."""


def rules_over(fields: Iterable[str], rules: Iterable[Rule] = RULES) -> tuple[Rule, ...]:
    """The rules that read only ``fields`` (the ones a table with those columns can be checked against)."""
    available = set(fields)
    return tuple(rule for rule in rules if set(rule.fields) <= available)


PLACEMENT_RULES: tuple[Rule, ...] = tuple(rule for rule in RULES if {"strategy", "num_devices"} <= set(rule.fields))
"""The rules between a job and where it runs (strategy and device count): the recommender's filter."""


def first_broken(values: Mapping[str, Any], rules: Iterable[Rule] = RULES) -> Rule | None:
    """The first rule one configuration breaks, or None when it satisfies them all."""
    for rule in rules:
        if not rule.scalar(values):
            return rule
    return None


def first_broken_rows(
    columns: Mapping[str, np.ndarray], rules: Iterable[Rule] = RULES
) -> tuple[Rule, np.ndarray] | None:
    """The first rule some row of ``columns`` breaks, with the offending row indices; None when all hold.

    One row (a served request's usual size) is checked by the rules' scalar forms: a numpy call per
    rule costs 5-15 us, the scalar check well under one (tests/core/test_rules.py: the two agree).
    """
    if columns and all(len(values) == 1 for values in columns.values()):
        rule = first_broken({name: plain(values[0]) for name, values in columns.items()}, rules)
        return None if rule is None else (rule, np.zeros(1, dtype=np.intp))
    for rule in rules:
        ok = np.asarray(rule.vector(columns), dtype=bool)
        if not ok.all():
            return rule, np.flatnonzero(~ok)
    return None


def satisfied(columns: Mapping[str, np.ndarray], rules: Iterable[Rule]) -> np.ndarray:
    """True for each row that satisfies every rule in ``rules``."""
    ok: np.ndarray | None = None
    for rule in rules:
        holds = np.asarray(rule.vector(columns), dtype=bool)
        ok = holds if ok is None else ok & holds
    if ok is None:
        return np.ones(len(next(iter(columns.values()))), dtype=bool)
    return ok


def row_values(columns: Mapping[str, np.ndarray], fields: Iterable[str], row: int) -> dict[str, object]:
    """One row of ``columns`` as plain values (for a rule's message)."""
    return {name: plain(columns[name][row]) for name in fields}
