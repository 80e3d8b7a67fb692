"""Backends shipped with OpenHLO; each lives in its own subpackage with a plugin.py."""
