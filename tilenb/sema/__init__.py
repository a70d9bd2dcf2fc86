"""The checker: AST -> typed tile IR (`tilenb.ir`), or every static error found."""
from .check import check_program, CheckedKernel, CheckedProgram  # noqa: F401
