"""Fit the scaling laws on finished train runs: pulling runs, measured speedup, speedup
fits, law forms, OLS, the additive roofline, the time law, CV, diagnostics, report, plots
and registration.

May import core, law, serve (to log the model), system and tracking; never train or sweep.
"""
