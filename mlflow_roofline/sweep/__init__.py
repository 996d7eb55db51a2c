"""A grid of train runs: the spec, the plan, status types, the child run and the runner.

May import core, energy (meter names), train (the train command line and tags), system and
tracking; never fit or serve.
"""
