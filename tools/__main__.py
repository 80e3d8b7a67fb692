"""``python -m tools`` is the ``openhlo`` command."""
import sys

from tools.cli import main

sys.exit(main())
