"""The machine a kernel is generated, compiled and launched for: one `Target`, parsed once.

Every part of tilenb that depends on the GPU reads a `Target` from here: the code generator
(which paths it may take: clusters, Hopper's wgmma and TMA), NVRTC (`-arch`), the launcher
(the device's own Target, with the limits its driver reports), the checker's and the
analysis' shared-memory budget, and the views. No other module spells a limit or compares an
arch string.

    target(None)                 ANY: code for any GPU (the generic paths; limits of the largest GPUs)
    target("sm_90")              the same Target as "sm_90a", "compute_90", "compute_90a", "sm90",
                                 90, "90", "9.0", 9.0 and (9, 0): an sm_90 device (H100, H200)
    target(t)                    a Target is returned as it is

Accepted spellings of compute capability X.Y (X and Y decimal, Y one digit): "sm_XY",
"sm_XYa", "smXY", "compute_XY", "compute_XYa", "XY", "X.Y", the int XY, the float X.Y and the
tuple (X, Y). The "a" forms name the arch-specific feature set of the same device, so they
parse to the same Target (an sm_90 target always compiles as sm_90a, see `nvrtc_arch`).
Anything else, a capability older than 5.0 (NVRTC's oldest), one no GPU has (the table
below lists the known ones) or an "a" form of a capability without one, raises
`UnsupportedError` naming the value.

Guarantees: a Target is immutable and hashable (a cache key); parsing a spelling always gives
the table's record for its capability, so equal capabilities give equal Targets; limits are in
bytes; `ANY` never enables an arch-specific path and carries the largest limits of the table
(what a kernel may use on some GPU; the launcher checks the device's own before a launch).

The table (`CAPABILITIES`) is the CUDA C++ Programming Guide's "Technical Specifications per
Compute Capability" (appendix "Compute Capabilities"): the shared memory of one SM and the most
one thread block may opt in to (dynamic shared memory, above the 48 KB every capability allows
statically). From compute capability 8.0 the driver keeps 1 KB of each SM's shared memory per
resident block for itself (the difference between the two columns); every capability listed
has 64K 32-bit registers per SM.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Dict, Optional, Tuple

from .lang.diagnostics import UnsupportedError

KB = 1024
STATIC_SMEM = 48 * KB          # shared memory a CTA may declare statically, on every capability
REGS_PER_SM = 64 * KB          # 32-bit registers of one SM, on every capability listed

# compute capability -> (shared memory per SM, most shared memory per block with opt-in, whether
# an arch-specific "a" variant exists), from the CUDA C++ Programming Guide's "Technical
# Specifications per Compute Capability" (module docstring)
CAPABILITIES: Dict[Tuple[int, int], Tuple[int, int, bool]] = {
    (5, 0): (64 * KB, 48 * KB, False),
    (5, 2): (96 * KB, 48 * KB, False),
    (5, 3): (64 * KB, 48 * KB, False),
    (6, 0): (64 * KB, 48 * KB, False),
    (6, 1): (96 * KB, 48 * KB, False),
    (6, 2): (64 * KB, 48 * KB, False),
    (7, 0): (96 * KB, 96 * KB, False),
    (7, 2): (96 * KB, 96 * KB, False),
    (7, 5): (64 * KB, 64 * KB, False),
    (8, 0): (164 * KB, 163 * KB, False),
    (8, 6): (100 * KB, 99 * KB, False),
    (8, 7): (164 * KB, 163 * KB, False),
    (8, 9): (100 * KB, 99 * KB, False),
    (9, 0): (228 * KB, 227 * KB, True),
    (10, 0): (228 * KB, 227 * KB, True),
    (10, 1): (228 * KB, 227 * KB, True),
    (10, 3): (228 * KB, 227 * KB, True),
    (11, 0): (228 * KB, 227 * KB, True),
    (12, 0): (100 * KB, 99 * KB, True),
    (12, 1): (100 * KB, 99 * KB, True),
}
OLDEST = (5, 0)
SPELLINGS = ('None', '"sm_XY"', '"sm_XYa"', '"smXY"', '"compute_XY"', '"compute_XYa"', '"XY"', '"X.Y"',
             'XY (int)', 'X.Y (float)', '(X, Y)')


@dataclass(frozen=True)
class Target:
    """One GPU target. cc: the compute capability (major, minor), None for ANY (code for any GPU).
    Shared-memory limits are bytes per CTA unless named per SM:
      static_smem     what a kernel may declare statically (48 KB everywhere)
      dynamic_smem    the most a CTA may opt in to with dynamic shared memory
      smem_per_sm     one SM's shared memory (CTAs resident together share it)
      smem_reserved   what the driver keeps per resident CTA out of `smem_per_sm`
      regs_per_sm     32-bit registers of one SM"""
    cc: Optional[Tuple[int, int]]
    dynamic_smem: int
    smem_per_sm: int
    smem_reserved: int
    static_smem: int = STATIC_SMEM
    regs_per_sm: int = REGS_PER_SM

    # ---- what the code generator may use
    @property
    def hopper(self) -> bool:
        """Whether Hopper's arch-specific features are usable: wgmma, TMA tensor copies with
        mbarrier transaction counts, setmaxnreg (PTX's sm_90a feature set). True exactly for
        compute capability 9.0: no other GPU runs sm_90a code (later ones lack wgmma)."""
        return self.cc == (9, 0)

    @property
    def clusters(self) -> bool:
        """Whether thread block clusters may be used: compute capability 9.0 or newer, or ANY
        (the code for any GPU keeps `__cluster_dims__`; an older device refuses it at compile time)."""
        return self.cc is None or self.cc >= (9, 0)

    # ---- names
    @property
    def sm(self) -> Optional[int]:
        """The capability as one number (90 for 9.0, 100 for 10.0); None for ANY."""
        return None if self.cc is None else self.cc[0] * 10 + self.cc[1]

    @property
    def name(self) -> Optional[str]:
        """The canonical spelling ("sm_90"); None for ANY."""
        return None if self.cc is None else f"sm_{self.sm}"

    def nvrtc_arch(self, ptx: bool = False) -> str:
        """NVRTC's --gpu-architecture for this target: "sm_XY" (a cubin) or, with ptx, "compute_XY";
        an sm_90 target is always compiled as sm_90a / compute_90a, so the arch-specific
        instructions of the wgmma paths assemble (the cubin runs on the same sm_90 devices).
        Raises UnsupportedError for ANY, which names no machine to compile for."""
        if self.cc is None:
            raise UnsupportedError("NVRTC needs a GPU target to compile for (such as 'sm_90'); arch=None names "
                                   "none (it means: the code for any GPU)")
        suffix = "a" if self.hopper else ""
        return f"{'compute' if ptx else 'sm'}_{self.sm}{suffix}"

    def smem_limit(self, dynamic: bool) -> int:
        """The bytes of shared memory a CTA may have: `dynamic_smem` with dynamic shared memory
        (the kernel opts in at launch), else `static_smem`."""
        return self.dynamic_smem if dynamic else self.static_smem

    def __str__(self) -> str:
        return self.name or "any GPU"


def _record(cc: Tuple[int, int]) -> Target:
    per_sm, optin, _ = CAPABILITIES[cc]
    return Target(cc, optin, per_sm, KB if cc >= (8, 0) else 0)


# code for any GPU: the largest limits of the table (what a kernel may use on some GPU)
ANY = Target(None, max(v[1] for v in CAPABILITIES.values()), max(v[0] for v in CAPABILITIES.values()), KB)
_BY_CC = {cc: _record(cc) for cc in CAPABILITIES}

_TEXT = re.compile(r"(?:(sm|compute)_?)?(\d+)(a?)")
_DOTTED = re.compile(r"(\d+)\.(\d)")


def _bad(value, reason: str) -> UnsupportedError:
    e = UnsupportedError(f"arch {value!r} names no GPU target: {reason}; spell one as {', '.join(SPELLINGS)} "
                         f"(compute capability {OLDEST[0]}.{OLDEST[1]} or newer)")
    e.value, e.reason = value, reason
    return e


def _cc_of(value) -> Tuple[Tuple[int, int], bool]:
    """(compute capability, whether the spelling asked for the arch-specific "a" form)."""
    if isinstance(value, bool):
        raise _bad(value, "a bool is not a target")
    if isinstance(value, int):
        if value < 10:
            raise _bad(value, "an int spells compute capability X.Y as the number XY (90 for 9.0)")
        return (value // 10, value % 10), False
    if isinstance(value, float):
        m = _DOTTED.fullmatch(repr(value))
        if m is None:
            raise _bad(value, "a float spells a compute capability X.Y with one digit after the point")
        return (int(m.group(1)), int(m.group(2))), False
    if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, int) and not isinstance(v, bool)
                                                            for v in value):
        return (value[0], value[1]), False
    if isinstance(value, str):
        text = value.strip().lower()
        m = _DOTTED.fullmatch(text)
        if m is not None:
            return (int(m.group(1)), int(m.group(2))), False
        m = _TEXT.fullmatch(text)
        if m is not None and len(m.group(2)) >= 2:
            n = int(m.group(2))
            return (n // 10, n % 10), bool(m.group(3))
        raise _bad(value, "not a spelling of a compute capability")
    raise _bad(value, f"a {type(value).__name__} is not a spelling of a target")


def target(value=None) -> Target:
    """The Target a spelling names (module docstring: the accepted spellings); None -> ANY.
    Raises UnsupportedError (a TileError, `.value` and `.reason` set) naming the value when it
    names no GPU target this table knows."""
    if value is None:
        return ANY
    if isinstance(value, Target):
        return value
    cc, arch_specific = _cc_of(value)
    if cc < OLDEST:
        raise _bad(value, f"compute capability {cc[0]}.{cc[1]} is older than {OLDEST[0]}.{OLDEST[1]}, "
                          f"the oldest NVRTC compiles for")
    if cc not in _BY_CC:
        known = ", ".join(f"{a}.{b}" for a, b in CAPABILITIES)
        raise _bad(value, f"no GPU has compute capability {cc[0]}.{cc[1]} (known: {known})")
    if arch_specific and not CAPABILITIES[cc][2]:
        raise _bad(value, f"compute capability {cc[0]}.{cc[1]} has no arch-specific ('a') feature set")
    return _BY_CC[cc]


def from_device(cc: Tuple[int, int], dynamic_smem: Optional[int] = None, smem_per_sm: Optional[int] = None,
                smem_reserved: Optional[int] = None) -> Target:
    """The Target of a present GPU: compute capability `cc` and the limits its driver reports
    (cudaDevAttrMaxSharedMemoryPerBlockOptin, ...PerMultiprocessor, cudaDevAttrReservedSharedMemoryPerBlock),
    each falling back to the table where not given. A capability the table does not know (a
    GPU newer than this release) is accepted from its attributes, with the limits of the newest
    table entry of an older capability for any attribute not given."""
    cc = (int(cc[0]), int(cc[1]))
    if cc < OLDEST:
        raise _bad(cc, f"compute capability {cc[0]}.{cc[1]} is older than {OLDEST[0]}.{OLDEST[1]}")
    base = _BY_CC.get(cc)
    if base is None:
        older = max(k for k in CAPABILITIES if k <= cc)
        base = replace(_BY_CC[older], cc=cc)
    return replace(base,
                   dynamic_smem=base.dynamic_smem if dynamic_smem is None else int(dynamic_smem),
                   smem_per_sm=base.smem_per_sm if smem_per_sm is None else int(smem_per_sm),
                   smem_reserved=base.smem_reserved if smem_reserved is None else int(smem_reserved))
