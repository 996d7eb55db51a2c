"""Small, faithful fakes of what cannot exist on the CI machine (NVML, RAPL)."""
