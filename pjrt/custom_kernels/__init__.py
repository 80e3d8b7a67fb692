"""Custom kernels: declared once (registry.py), run natively as ``stablehlo.custom_call``
on the cpu backend, called from JAX (frameworks/jax/custom_kernels.py) and PyTorch
(frameworks/torch/custom_kernels.py), checked by ``check_kernel`` (check.py)."""
from pjrt.custom_kernels.implementation import (Handler, KernelBuildError, SharedLibrary,
                                                Source, ffi_header)
from pjrt.custom_kernels.registry import (CUSTOM_KERNELS, CustomKernel, TensorSpec,
                                          define_kernel, register_ffi_handler)

__all__ = ["CUSTOM_KERNELS", "CustomKernel", "Handler", "KernelBuildError", "SharedLibrary",
           "Source", "TensorSpec", "check_kernel", "define_kernel", "ffi_header",
           "register_ffi_handler"]


def check_kernel(name: str, **options):
    """See pjrt.custom_kernels.check.check_kernel (imported lazily: it builds programs)."""
    from pjrt.custom_kernels.check import check_kernel as check
    return check(name, **options)
