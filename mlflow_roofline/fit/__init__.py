"""Fit the scaling laws on finished train runs, log the fit runs and register the model.

- :mod:`fit.runs`: pulling and validating train runs (run_data, validity), measured
  speedup and efficiency, the repeat-to-repeat noise, the law features of the runs.
- :mod:`fit.speedup_fit`: the speedup laws per strategy.
- :mod:`fit.forms`: the energy forms (the catalog; OLS forms, the additive decomposition,
  the roofline-shaped forms and their least-squares machinery, the time law), each scored
  by grouped CV, the size-extrapolation check and the sanity checks, and the choice
  among them (selection); :mod:`fit.forms.energy_laws` fits every form of one hardware.
- :mod:`fit.hardware_fit`: one hardware's fit (:class:`HardwareFit`), its metrics and text report.
- :mod:`fit.pooled`: the pooled forms over several hardware, their checks and result.
- :mod:`fit.report`: what a fit run shows besides its metrics: files, plots, the
  measured-vs-predicted table, the Markdown description.
- :mod:`fit.fit_runs`: logging the fit run(s) through the TrackingClient;
  :mod:`fit.registration`: the registry's naming rules and the ledger that registers
  (and can undo) models; :mod:`fit.failure`: how a failing fit ends.
- :mod:`fit.pipeline`: :func:`run_fit`, the whole stage; the command calls it.

May import core, law, serve (to log the model), system and tracking; never train or sweep.
Talks to MLflow only through :class:`~mlflow_roofline.tracking.client.TrackingClient`.
"""
