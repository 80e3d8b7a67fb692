"""``python -m tools.fuzz ARGS`` is ``openhlo fuzz ARGS``."""
import sys

from tools.cli import main

if __name__ == "__main__":
    sys.exit(main(["fuzz", *sys.argv[1:]]))
