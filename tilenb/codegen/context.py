"""The state of one kernel variant's generation: the object every lowering module receives as `g`.

Guarantees: a `Gen` is made once per `generate` call and is never shared between variants. It is
an `Emitter` (the lines, indentation, fresh names and source comments of the kernel body) that
also carries what the lowering modules read and record while they write the body:

- read-only after `paths.choose`: `kir`, `target`, `plan` (the analysis' places and barriers,
  `tilenb.codegen.plan`), `T` (threads a CTA), `low` and `smem` (the analysis' lowering and
  shared-memory map), `paths` (which lowering writes each loop), `gemm` / `stream` (the sm_90
  GEMM and streamed-attention lowerings, None when the kernel has none), `hints` (L2 policies),
  `swz` (the shared tiles' swizzles) and `layouts` (every register tile's layout);
- written while the body is written: `tiles` and `views` (declared tiles and `let` views), the
  per-statement caches (`regions`, `pre`, `pre_bcast`, `fast_div`, `skeys`, `memo`), the control
  context (`guards`, `loop_ctx`, `ret_flag`) and the tensor-core and cluster bookkeeping the
  `mma` and `generic.cluster` modules keep.

It holds no lowering of its own: statements and expressions are written by the modules of
`tilenb.codegen.generic`, `tilenb.codegen.mma` and `tilenb.codegen.sm90`.
"""
from __future__ import annotations

from typing import Dict, List, Optional

from .. import ir
from ..target import Target
from .emitter import Emitter
from .plan import Plan, plan as make_plan
from .values import Region, TileVar, ViewInfo


class Gen(Emitter):
    """One kernel variant being generated (see the module doc)."""

    def __init__(self, kir: ir.KernelIR, source_text: Optional[str], line_offset: int, target: Target):
        super().__init__(source_text, line_offset)
        self.kir = kir
        self.target = target                    # tilenb.target: the machine, its features and limits
        self.plan: Plan = make_plan(kir, target)
        self.T = kir.threads
        self.paths = None                       # paths.Paths: set by paths.choose
        self.gemm = None                        # sm90.gemm.Lowering of this kernel, if any
        self.stream = None                      # sm90.streamed.Streaming of this kernel, if any
        self.tiles: Dict[int, TileVar] = {}
        self.views: Dict[int, ViewInfo] = {}
        self.inline_slices: Dict[int, tuple] = {}  # id(Ref of an inline view) -> (its slice, the Ref)
        self.pre: Dict[int, str] = {}          # id(expr) -> C variable holding its value (coop reduce)
        self.pre_bcast: set = set()            # ids in pre valid at a broadcast's coordinates too
        # id(Binary '/') -> the reciprocal of its divisor: a variable of this chunk, or, on fragments,
        # a function of the element's At (mma: one reciprocal a row)
        self.fast_div: Dict[int, object] = {}
        self.skeys: Dict[int, tuple] = {}
        self.regions: Dict[int, Region] = {}   # id(expr) -> its region within one statement
        self.masks: Dict[int, object] = {}     # id(statement) -> analysis.masks.CornerMask (set by paths.choose)
        self.where_pick: Dict[int, int] = {}   # id(where) -> 1 / 2 in a branch of generic.masks.split
        self.guards: List[str] = []            # flags that turn per-thread statements into no-ops
        self.loop_ctx: List[dict] = []
        self.ret_flag = False
        self.layouts: Dict[int, object] = {}
        self.dims: Dict[str, str] = {}
        self.wgmma_ok: Dict[int, bool] = {}    # id(tile Sym) -> mma.staging.wgmma_readable

    def guard(self) -> Optional[str]:
        """The C condition under which a per-thread statement is a no-op here (None: never)."""
        flags = list(self.guards)
        if self.ret_flag:
            flags = ["tnb_ret"] + flags
        if not flags:
            return None
        return " || ".join(flags)

    def tile_of(self, sym) -> Optional[TileVar]:
        """The declared tile of a tile symbol (None before its declaration, or for a non-tile)."""
        return self.tiles.get(id(sym))
