"""Real services the slow tests start on loopback and stop: PostgreSQL, an MLflow server, a Ray cluster."""
