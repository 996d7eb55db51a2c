"""The click commands behind ``mlflow-roofline``: argument parsing only, then one call into a
stage. Nothing in the package imports this subpackage or the CLI.
"""
