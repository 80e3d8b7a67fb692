"""Running JAX scripts on the openhlo plugin in a fresh interpreter, for the plugin tests (a
support module: Bazel gives each test file only its own module and these)."""
import os
import subprocess
import sys
import textwrap

import pytest

from pjrt.c_api.loader import library_path

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
pytestmark = pytest.mark.skipif(library_path() is None,
                                reason="pjrt/c_api/_openhlo_pjrt*.so is not built")

PRELUDE = """
import numpy as np
import frameworks.jax.plugin as plugin
plugin.initialize()
import jax, jax.numpy as jnp
"""


def run(body: str, platform: str = "openhlo", **env) -> subprocess.CompletedProcess:
    """Run ``body`` after PRELUDE with JAX_PLATFORMS=``platform``; asserts a clean exit."""
    environ = dict(os.environ, JAX_PLATFORMS=platform, PYTHONPATH=ROOT, **env)
    proc = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body)],
                          capture_output=True, text=True, env=environ, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "terminate called" not in proc.stderr
    return proc
