"""The plugin's FFI extension (ffi.cc) through the C API, as a framework uses it: walk
GetPjrtApi's extension chain to type 5, register a typed XLA FFI handler with
PJRT_FFI_Register_Handler, and a ``stablehlo.custom_call`` of that name runs it (results
against numpy); registrations the plugin cannot honor fail with their PJRT error code.

Runs in a child interpreter: registering reaches Python through the callbacks that
``loader.install`` puts into the process-wide library, which must not leak into other tests."""
import os
import subprocess
import sys
import textwrap

import pytest

from pjrt.c_api.loader import library_path
from pjrt.plugins.cpu.codegen.build import find_compiler

pytestmark = [
    pytest.mark.skipif(library_path() is None, reason="pjrt/c_api/_openhlo_pjrt*.so is not built"),
    pytest.mark.skipif(find_compiler() is None, reason="needs a C++ compiler")]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))

SCRIPT = r'''
import ctypes
import numpy as np
import pjrt
from pjrt.c_api import loader
from pjrt.custom_kernels import Source
from pjrt.errors import UnimplementedError

def no_programs(code, fmt):
    raise UnimplementedError("this test compiles through pjrt, not PJRT_Client_Compile")

lib = ctypes.CDLL(loader.install(no_programs, lambda *a, **k: pjrt.make_client("cpu")))

class ExtensionBase(ctypes.Structure):
    pass
ExtensionBase._fields_ = [("struct_size", ctypes.c_size_t), ("type", ctypes.c_int),
                          ("next", ctypes.POINTER(ExtensionBase))]

class RegisterArgs(ctypes.Structure):  # PJRT_FFI_Register_Handler_Args, 60 bytes
    _fields_ = [("struct_size", ctypes.c_size_t), ("target_name", ctypes.c_char_p),
                ("target_name_size", ctypes.c_size_t), ("api_version", ctypes.c_int),
                ("handler", ctypes.c_void_p), ("platform_name", ctypes.c_char_p),
                ("platform_name_size", ctypes.c_size_t), ("traits", ctypes.c_int)]

class UserDataAddArgs(ctypes.Structure):  # PJRT_FFI_UserData_Add_Args
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                ("context", ctypes.c_void_p), ("type_id", ctypes.c_int64),
                ("data", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]

class ErrorArgs(ctypes.Structure):  # PJRT_Error_Message_Args (GetCode's code sits at 24 too)
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                ("error", ctypes.c_void_p), ("message", ctypes.c_void_p),
                ("message_size", ctypes.c_size_t)]

SLOT = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
lib.GetPjrtApi.restype = ctypes.c_void_p
api = lib.GetPjrtApi()
start = ctypes.c_void_p.from_address(api + 8).value  # PJRT_Api.extension_start
slot = lambda i: SLOT(ctypes.c_void_p.from_address(api + 40 + 8 * i).value)  # Error_* 0..2

def error(result):
    """(code, message) of a returned PJRT_Error, destroyed; None for success."""
    if not result:
        return None
    args = ErrorArgs(ctypes.sizeof(ErrorArgs), None, result)
    slot(1)(ctypes.addressof(args))
    message = ctypes.string_at(args.message, args.message_size).decode()
    code_args = ErrorArgs(28, None, result)
    slot(2)(ctypes.addressof(code_args))
    code = ctypes.c_int.from_buffer(code_args, 24).value
    slot(0)(ctypes.addressof(ErrorArgs(24, None, result)))
    return code, message

types = []
node = ctypes.cast(start, ctypes.POINTER(ExtensionBase))
while node:
    types.append(node.contents.type)
    if node.contents.type == 5:
        ffi = ctypes.cast(node, ctypes.c_void_p).value
        assert node.contents.struct_size == 48
    node = node.contents.next
assert 5 in types, types
fn = lambda offset, argtype: ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(argtype))(
    ctypes.c_void_p.from_address(ffi + offset).value)
register = fn(40, RegisterArgs)
user_data_add = fn(32, UserDataAddArgs)

handler = Source(r"""
extern "C" XLA_FFI_Error* scaled_sum(XLA_FFI_CallFrame* frame) {
  const float* x = (const float*)ohlo_arg(frame, 0)->data;
  const float* y = (const float*)ohlo_arg(frame, 1)->data;
  float* out = (float*)ohlo_ret(frame, 0)->data;
  const float alpha = (float)ohlo_attr_scalar(frame, "alpha", 0.0);
  for (int64_t i = 0; i < ohlo_num_elements(ohlo_arg(frame, 0)); ++i)
    out[i] = alpha * x[i] + y[i];
  return 0;
}
""", "scaled_sum").handler_address()

def registration(name=b"c_api_scaled_sum", platform=b"openhlo", api_version=1, size=60):
    return RegisterArgs(size, name, len(name), api_version, handler, platform, len(platform), 0)

assert error(register(registration(platform=b"OpenHLO"))) is None
x = np.arange(12, dtype=np.float32).reshape(3, 4)
y = np.full((3, 4), 0.5, np.float32)
exe = pjrt.make_client("cpu").compile("""
func.func @main(%x: tensor<3x4xf32>, %y: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %z = stablehlo.custom_call @c_api_scaled_sum(%x, %y) {mhlo.backend_config = {alpha = 3.0 : f32}} :
      (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  return %z : tensor<3x4xf32>
}
""")
assert exe.fallbacks == []
np.testing.assert_array_equal(exe(x, y)[0], 3 * x + y)
assert error(register(registration())) is None  # the same handler again: a no-op

INVALID_ARGUMENT, UNIMPLEMENTED = 3, 12
code, message = error(register(registration(platform=b"cuda")))
assert code == INVALID_ARGUMENT and "'cuda'" in message and "c_api_scaled_sum" in message, message
code, message = error(register(registration(b"legacy", api_version=0)))
assert code == UNIMPLEMENTED and "api_version 1" in message, message
code, message = error(register(registration(size=52)))  # the layout without api_version
assert code == INVALID_ARGUMENT and "struct_size 52" in message, message
code, message = error(user_data_add(UserDataAddArgs(48, None, None, 1, None, None)))
assert code == UNIMPLEMENTED and "PJRT_FFI_UserData_Add" in message, message
print("ok")
'''


def test_handler_registered_through_the_ffi_extension_runs_as_a_custom_call():
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT)], capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=ROOT), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ok")
