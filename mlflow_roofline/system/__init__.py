"""Processes and signals: stopping a process group (``processes``), whether a recorded
process still lives (``liveness``), and signals as exceptions, ignored during cleanup or
forwarded to a child (``signals``).

Imports only core; never mlflow or torch.
"""
