"""Modules, kernels, launches and the backends that run them."""
