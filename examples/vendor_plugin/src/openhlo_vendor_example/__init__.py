"""An example OpenHLO backend plugin (see README.md); the backend is in plugin.py."""
