"""A template OpenHLO backend (see ../../README.md); the backend is in plugin.py."""
