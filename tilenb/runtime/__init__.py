"""Modules, kernels, launches and the backends that run them.

`module` (Module, Kernel) -> `launch` (dispatch) -> `checks` (the launch checks both backends
share) -> `cpu/` (the numpy reference executor) or `gpu/` (the CUDA backend). `checks` imports
neither backend, and neither backend imports `launch`.
"""
