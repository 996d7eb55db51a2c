"""Pulling and validating train runs for a fit: the pull and its drop reasons (run_data), the
physical validity of energy and time (validity), measured speedup and efficiency
(measured_speedup), the repeat-to-repeat noise floor (noise) and the law features of the
runs (feature_frame)."""
