"""Core names and rules: every logged name (schema), the train configuration and its one
rule table, errors, the roofline proxies and hardware naming.

Imports nothing else of this package and never imports mlflow or torch.
"""
