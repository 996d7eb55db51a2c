"""Fit the scaling laws on finished train runs: pulling and validating runs (run_data,
validity), measured speedup and speedup fits, the form table (forms), OLS forms (ols), the
additive roofline (roofline), the roofline-shaped forms' shared least-squares machinery
(nonlinear), the roofline x efficiency form (roofline_eff), the smooth roofline in time
(roofline_smooth), the time law,
grouped CV (cv), the size-extrapolation check (extrapolation), sanity properties (sanity),
the choice of form (selection), diagnostics, every law of one hardware (energy_laws,
hardware), the pooled forms over several hardware (pooled) and their result
(pooled_result), the fit run's metrics, report, files and plots, registration and how a
failing fit ends (failure); job only orchestrates, fit_runs logs the fit runs and registers
their models.

May import core, law, serve (to log the model), system and tracking; never train or sweep.
"""
