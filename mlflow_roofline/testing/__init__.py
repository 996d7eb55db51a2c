"""Scaffolding for tests, benchmarks and the demo: synthetic runs drawn from a known law
(ground_truth: the laws, synthetic: the runs, synthetic_log: logging them), and a loopback
``mlflow models serve`` wrapper. Nothing at run time imports it.

It lives in the package (not in ``tests/``) because the shipped benchmarks import it too.
"""
