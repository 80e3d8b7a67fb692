"""The prepared GPU run of the cuda backend (device_run.sh, device_checks.py; README.md)."""
