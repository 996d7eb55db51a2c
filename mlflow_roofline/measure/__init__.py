"""The measure stage: run a command as a child process, meter its energy, log one MLflow run.

- :mod:`~mlflow_roofline.measure.wrapper`: the whole ``mlflow-roofline measure`` (what
  the command calls) and :func:`~mlflow_roofline.measure.wrapper.measure`;
- :mod:`~mlflow_roofline.measure.command_process`: starting the command, following its
  process (signals forwarded, the watchdog told) and reading its exit;
- :mod:`~mlflow_roofline.measure.measured_run`: the MLflow run a measured command is
  logged into (joined through ``MLFLOW_RUN_ID`` or new), through the TrackingClient.

May import tracking, energy, system and core; never another stage.
"""
