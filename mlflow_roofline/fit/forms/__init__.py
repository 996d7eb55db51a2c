"""The energy forms a fit compares, each with its grouped CV, size-extrapolation and sanity checks.

The catalog of forms (catalog); what every fitted form holds (fitted_form); OLS forms
(ols); the additive decomposition E = eps_c*C + eps_m*M + e0 (additive); the
roofline-shaped forms (roofline_eff, roofline_smooth, roofline_complete) and their shared least-squares
machinery (nonlinear); the time law (time_law); grouped CV (cv), the size-extrapolation
check (extrapolation), the sanity properties (sanity), the choice among forms (selection),
the average of the forms that tie (averaging), diagnostics; energy_laws fits every form of one
hardware and picks the registered one.
"""
