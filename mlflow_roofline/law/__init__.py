"""The fitted law as plain data: log features, the law forms and their intervals, speedup laws, the FittedLaw.

``log_features`` (a job's features, all logs), ``coefficients`` (what every form stores,
and its one prediction interval), ``linear`` (the log-linear forms), ``roofline_efficiency``
(the roofline x efficiency forms, additive and smooth), ``averaged`` (the mean in logs of
several of those), ``speedup`` (S(N) per strategy),
``fitted`` (the whole law the served model reads back from JSON).

Pure numpy/scipy: never imports mlflow, torch or any stage above it; imports only core.
"""
