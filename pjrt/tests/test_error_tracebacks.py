"""An OpenHLOError that a user's script does not catch prints the message and the user's own
frames, not OpenHLO's internals (stablehlo.errors.api_boundary); OPENHLO_TRACEBACK=1 prints
everything. Each script runs in a subprocess, as a user would run it."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

_REPO = pathlib.Path(__file__).resolve().parents[2]

_ADD = '''
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.add %x, %x : tensor<2xf32>
  func.return %0 : tensor<2xf32>
}'''

SCRIPTS = {
    "parse": ('import stablehlo\n'
              'stablehlo.parse("func.func @main( {")\n',
              "<string>:1:18: error: expected type of function argument, found '{'"),
    "verify at compile": ('import pjrt\n'
                          'pjrt.make_client("cpu").compile("""\n'
                          'func.func @main(%x: tensor<2xf32>) -> tensor<3xf32> {\n'
                          '  %0 = stablehlo.add %x, %x : tensor<2xf32>\n'
                          '  func.return %0 : tensor<2xf32>\n'
                          '}""")\n',
                          "VerificationError"),
    "shape at execution": ('import numpy as np\n'
                           'import pjrt\n'
                           f'exe = pjrt.make_client("cpu").compile("""{_ADD}""")\n'
                           'exe(np.zeros(3, np.float32))\n',
                           "argument 0 of @main: expected tensor<2xf32> (shape (2,)), "
                           "got shape (3,)"),
    "bad client option": ('import pjrt\n'
                          'pjrt.make_client("cpu", no_such_option=1)\n',
                          "unexpected keyword argument 'no_such_option'"),
}

# A backend of the user's own that refuses an op at compile: its frame is the user's and stays.
_USER_BACKEND = f'''
import pjrt
from pjrt.host import HostClient
from pjrt.plugins.compile_driver import CompileDriverMixin

class Refusing(CompileDriverMixin, HostClient):
    platform_name = "refusing"

    def compile_program(self, module, entry, options):
        raise pjrt.UnimplementedError("'stablehlo.add' is not supported by refusing")

pjrt.register_plugin("refusing", Refusing)
pjrt.make_client("refusing").compile("""{_ADD}""")
'''


def _run(tmp_path, source: str, **env) -> list[str]:
    script = tmp_path / "user_script.py"
    script.write_text(source)
    environ = {name: value for name, value in os.environ.items() if name != "OPENHLO_TRACEBACK"}
    environ.update(PYTHONPATH=str(_REPO), **env)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            env=environ, cwd=tmp_path, timeout=300)
    assert result.returncode == 1, result.stderr
    return result.stderr.strip().splitlines()


@pytest.mark.parametrize("case", sorted(SCRIPTS))
def test_an_uncaught_error_prints_the_message_and_the_users_frames(tmp_path, case):
    source, message = SCRIPTS[case]
    lines = _run(tmp_path, source)
    assert len(lines) <= 6, "\n".join(lines)
    assert message in lines[-1]
    assert str(tmp_path / "user_script.py") in lines[1]  # the user's call is still shown
    assert "During handling" not in "\n".join(lines)
    assert "direct cause" not in "\n".join(lines)


def test_a_users_backend_frame_is_kept(tmp_path):
    lines = _run(tmp_path, _USER_BACKEND)
    text = "\n".join(lines)
    assert lines[-1] == ("pjrt.errors.UnimplementedError: 'stablehlo.add' is not supported by "
                         "refusing")
    assert "in compile_program" in text  # the user's own code, called by OpenHLO
    assert "pjrt/api.py" not in text and "pjrt/host.py" not in text
    assert len(lines) <= 8, text


def test_openhlo_traceback_keeps_the_internal_frames(tmp_path):
    source, message = SCRIPTS["parse"]
    lines = _run(tmp_path, source, OPENHLO_TRACEBACK="1")
    text = "\n".join(lines)
    assert message in lines[-1]
    assert os.path.join("stablehlo", "text", "parser.py") in text
    assert len(lines) > 6


def test_a_caught_error_keeps_its_type_and_message():
    import stablehlo
    with pytest.raises(stablehlo.ParseError, match=r"<string>:1:18: error: expected type") as err:
        stablehlo.parse("func.func @main( {")
    assert (err.value.line, err.value.col) == (1, 18)
