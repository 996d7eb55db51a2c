"""A grid of train runs: the spec, the plan, status types, the child run and the runner.

Modules, bottom up: ``status`` (states, outcomes; imports nothing of the others),
``spec`` (read and check a YAML spec), ``plan`` (expand it), ``store`` (where each
configuration stands in the tracking store), ``reconcile`` (what to do with each),
``claim`` (one run per configuration across sweeps sharing a store), ``child_run``
(create one child run), ``fresh_child`` (measure it in a train process of its own) and
``child_outcome`` (settle it once that process ended), ``warm_child`` (measure it with
ranks forked from a warm server), ``parent_run`` and ``progress`` (the sweep run's
bookkeeping), ``claim_and_run`` (claim one unit and measure it), ``queue`` (the loop)
and ``runner`` (the sweep's entry: parent run, signals, results).

May import core, energy (meter names), train (the train command line and tags), system and
tracking; never fit or serve.
"""
