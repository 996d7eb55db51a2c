"""The fitted law as plain data: features, the linear law, speedup laws, the FittedLaw.

Pure numpy/scipy: never imports mlflow, torch or any stage above it; imports only core.
"""
