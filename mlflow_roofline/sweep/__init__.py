"""A grid of train runs: the spec, the plan, status types, the child run and the runner.

Modules, bottom up: ``status`` (states, outcomes; imports nothing of the others),
``spec`` (read and check a YAML spec), ``plan`` (expand it), ``store`` (where each
configuration stands in the tracking store), ``reconcile`` (what to do with each),
``claim`` (one run per configuration across sweeps sharing a store), ``child_run``
(create and measure one child run), ``parent_run`` and ``progress`` (the sweep run's
bookkeeping), ``runner`` (the loop).

May import core, energy (meter names), train (the train command line and tags), system and
tracking; never fit or serve.
"""
