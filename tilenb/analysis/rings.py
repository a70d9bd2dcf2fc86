"""The records of a streamed loop's TMA ring (attention on wgmma), as `analysis.lowering`
decides them: each tensor slice streamed into a stage (`RingOp`), the ring as a whole
(`Ring`: stages, how many turns ahead, its byte offset and mbarrier words, whether its two
warpgroups take turns at the tensor cores), and the waits its loop makes (`Wait`: the mbarrier
and named-barrier waits the barriers view lists beside the CTA barriers).

Guarantees: plain records; every figure here is derived from the fields the lowering set
(byte sizes, the 1024-byte aligned footprint the shared-memory map reserves)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

from .. import ir
from .gemm_loops import RING_ALIGN

# The hardware named barriers of the warpgroup ping-pong (`Ring.pingpong`): warpgroup w waits on
# PINGPONG_BARRIERS[w] before it issues its products and arrives on the other's after; nothing else
# in generated code uses them (__syncthreads is barrier 0).
PINGPONG_BARRIERS = (1, 2)


@dataclass
class RingOp:
    """A tensor slice of the loop, streamed into each stage of the ring."""
    slice: ir.Slice
    k_inner: bool                 # B as [N, K] (dot_t): K is the contiguous dimension
    rows: int
    cols: int
    span: int                     # swizzle span in bytes (32, 64, 128)
    chunk: int                    # elements of one box along the contiguous dimension
    fixed: List[ir.Expr]
    row0: ir.Expr                 # start of the slice's rows
    col0: ir.Expr                 # start of its columns (contiguous)
    dtype: str
    dot: Optional[ir.Dot] = None  # the dot that reads it
    key: int = 0                  # id of the dot's operand (the slice, or a view of it)
    off: int = 0                  # byte offset in a stage
    tmap: str = ""
    col_aligned: bool = False     # col0 proven a 16-byte boundary (analysis/tc_moves): no run-time test

    @property
    def boxes(self) -> int:
        return self.cols // self.chunk

    @property
    def nbytes(self) -> int:
        return self.rows * self.cols * 2

    @property
    def padded(self) -> int:
        return -(-self.nbytes // 1024) * 1024


@dataclass
class Ring:
    loop: ir.For
    ops: List[RingOp]
    stage_bytes: int = 0
    stages: int = 0
    ahead: int = 1                # turns whose copies are in flight ahead of the one computed
    off: int = 0                  # byte offset from tnb_smem (aligned to 1024 at run time)
    defer: bool = False           # the turn's last dot retires at the next turn's first wait
    defer_acc: Optional[ir.Sym] = None   # the register tile that dot accumulates into
    # the two warpgroups of the CTA (each owning 64 rows of the dots' results) take turns issuing
    # their products, one's between the other's softmax (codegen/sm90/streamed.py: the named
    # barriers PINGPONG_BARRIERS); pingpong_why: why it applies, or why not
    pingpong: bool = False
    pingpong_why: str = ""

    @property
    def barrier_bytes(self) -> int:
        """The ring's mbarrier words: a "full" barrier per slice and stage, an "empty" one per stage."""
        return 8 * self.stages * (len(self.ops) + 1)

    @property
    def nbytes(self) -> int:
        return RING_ALIGN + self.stages * self.stage_bytes + self.barrier_bytes


@dataclass(frozen=True)
class Wait:
    """A wait the generated code makes in a streamed loop besides the CTA barriers: an mbarrier
    wait (a slice of the turn has landed; thread 0 waits until every warp freed a stage) or a
    named barrier of the warpgroup ping-pong. line / position: the statement it is at (as
    `barriers.Barrier`); where: "before" it, or "after" it (the turn's last statement, for what
    happens at the turn's end); who: which threads wait ("every warp", "thread 0", "warpgroup
    0", ...); barrier: what is waited on (an mbarrier, or "named barrier 1"); reason: why."""
    line: int
    position: int
    where: str
    kind: str                 # "mbarrier" or "named barrier"
    who: str
    barrier: str
    reason: str

    def to_json(self) -> dict:
        return {"line": self.line, "position": self.position, "where": self.where, "kind": self.kind,
                "who": self.who, "barrier": self.barrier, "reason": self.reason}


WaitList = Tuple[Wait, ...]
