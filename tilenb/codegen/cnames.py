"""The names a kernel's C symbol cannot take as written, and the symbol such a kernel gets.

Guarantees: `kernel_base(name)` is `name` itself for every tile-language kernel name that is
free in the generated translation unit, and `tnb_kernel_<name>` for a name that is not:

- a C++ keyword or alternative token (`int`, `new`, `class`, `and`, ...), `main` (which a
  kernel may not be), and the names C++ reserves to the implementation (a leading `_` and a
  capital letter, or a leading `__`: `__syncthreads`, `_Pragma`);
- what NVRTC declares before the first line: the built-in variables (`threadIdx`, `blockIdx`,
  `blockDim`, `gridDim`, `warpSize`), the namespace `std`, the types `dim3`, `size_t`,
  `ptrdiff_t`, `va_list` and the vector types (`float4`, `uint2`, ... and their `make_`
  functions), and the C-linkage functions of the device runtime and the CUDA math library
  (`printf`, `malloc`, `clock64`, `fabs`, `powf`, `umin`, `normcdf`, ...), with which an
  `extern "C"` kernel of that name conflicts;
- the macros `NULL` and `assert`, the generator's own prefixes (`tnb_`, `TNB_`, `TILENB_`), and the
  fixed-width integer types the code may name (`int8_t`, `uint64_t`, ...).

No other name is changed (the symbols of the shipped kernels and Nsight Compute's kernel
filters stay as they were). The escaped symbols cannot meet another kernel's: every escaped
one starts with `tnb_`, and no name kept as written does.
"""
from __future__ import annotations

import re

PREFIX = "tnb_kernel_"

# C++ (through C++23) keywords and alternative tokens; the tile language's own keywords are
# refused by its grammar before a symbol is made, but are listed so the rule stands alone
_KEYWORDS = frozenset("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
char32_t class compl concept const consteval constexpr constinit const_cast continue co_await
co_return co_yield decltype default delete do double dynamic_cast else enum explicit export
extern false float for friend goto if inline int long mutable namespace new noexcept not not_eq
nullptr operator or or_eq private protected public register reinterpret_cast requires return
short signed sizeof static static_assert static_cast struct switch template this thread_local
throw true try typedef typeid typename union unsigned using virtual void volatile wchar_t while
xor xor_eq main restrict
""".split())

# declared by NVRTC's built-in header, or a macro there: variables, namespaces, types
_DECLARED = frozenset("""
threadIdx blockIdx blockDim gridDim warpSize std dim3 size_t ptrdiff_t va_list NULL assert
nullptr_t max_align_t intptr_t uintptr_t
""".split())

# functions with C linkage that the CUDA device runtime and math library declare (each with its
# `f` single-precision form where it has one; the tile language's own built-ins such as `exp`,
# `sqrt`, `min` are refused as kernel names before this is asked)
_C_FUNCTIONS = frozenset("""
acos acosh asin asinh atan atan2 atanh cbrt ceil copysign cos cosh cospi erf erfc erfcinv erfcx
erfinv exp exp10 exp2 expm1 fdim floor fma fmax fmin fmod frexp hypot ilogb isfinite isinf isnan
j0 j1 jn ldexp lgamma llrint llround log log10 log1p log2 logb lrint lround modf nan nearbyint
nextafter norm norm3d norm4d normcdf normcdfinv pow powi rcbrt remainder remquo rhypot rint
rnorm rnorm3d rnorm4d round rsqrt scalbln scalbn signbit sin sincos sincospi sinh sinpi sqrt tan
tanh tgamma trunc y0 y1 yn cyl_bessel_i0 cyl_bessel_i1 fdivide
""".split())
_C_FUNCTIONS = _C_FUNCTIONS | frozenset(n + "f" for n in _C_FUNCTIONS) | frozenset("""
printf vprintf malloc free memcpy memset clock clock64 abs labs llabs fabs
min max umin umax llmin llmax ullmin ullmax
""".split())

_PATTERNS = re.compile(
    r"_[A-Z_].*"                                    # reserved to the implementation
    r"|tnb_.*|TNB_.*|TILENB_.*"                     # the generator's own names
    r"|(?:make_)?(?:u?char|u?short|u?int|u?long|u?longlong|float|double)[1-4]"   # vector types
    r"|u?int(?:8|16|32|64)_t")


def clashes(name: str) -> bool:
    """Whether `name`, used as written for an `extern "C" __global__` function, would clash with
    C++ or with what the generated translation unit declares (see the module docstring)."""
    return (name in _KEYWORDS or name in _DECLARED or name in _C_FUNCTIONS
            or _PATTERNS.fullmatch(name) is not None)


def kernel_base(name: str) -> str:
    """The base of a kernel's C symbol: `name`, or `tnb_kernel_<name>` where `name` clashes."""
    return PREFIX + name if clashes(name) else name
