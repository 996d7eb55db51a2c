"""Processes and signals: start and stop a process group, liveness of a recorded
process, and one signal-to-exception context.

Imports only core; never mlflow or torch.
"""
