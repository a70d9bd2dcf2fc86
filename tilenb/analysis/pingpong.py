"""The warpgroup ping-pong of a streamed loop, and the waits such a loop makes besides CTA barriers:
decided here for `analysis.lowering` (which sets `Ring.pingpong` / `Ring.pingpong_why` and
`KernelLowering.waits` from these functions), obeyed by the generator (codegen/sm90/streamed.py,
whose module docstring gives the protocol and why no wait can hang), listed by the barriers view.

Guarantees: `decide` is a pure function of the ring, the thread count, the lowering's facts and
routes and the switch `SWITCHES.stream_pingpong` (0: never applies; 2: wherever it is safe); it
applies only where the generator's proof holds (two warpgroups, 64 rows each on the mma row
layout, a deferred last dot, two streamed slices, nothing in the loop body that waits for the
whole CTA), and by default (1) only where it pays (`PAYING_PRODUCT`), and otherwise says which of
these fails. `ring_waits` lists every mbarrier and named-barrier wait the generated loop
makes, at the top-level statement of the body whose code makes it, with its reason.
"""
from __future__ import annotations

from typing import Callable, List, Set, Tuple

from .. import ir
from ..switches import SWITCHES
from .mma_tiles import MmaLayout
from .rings import PINGPONG_BARRIERS, Ring, Wait


# A warpgroup's products must be long enough to hide the other warpgroup's softmax: the ping-pong
# applies by default where the streamed Q K^T slice holds at least this many elements (BC x D).
# Measured on the H200 (bench/results/h200_attention_pingpong.txt, main ed2f911): BC 128 x D 128
# gains 1.6-4.2% on every suite attention kernel but the causal one at 16k keys (-0.1%); BC 128 x
# D 64 ranges from -5% to +4%, BC 64 x D 128 loses 31-34%, BC 64 x D 64 5-6%.
PAYING_PRODUCT = 128 * 128


def _route_of_dot(routes, d):
    for r in routes.values():
        if any(d is x for x in r.frag):
            return r
    return None


def decide(ring: Ring, T: int, facts, routes, views: Set[int], tile_statement: Callable) -> Tuple[bool, str]:
    """Whether the two warpgroups of the CTA take turns issuing the loop's products, and why or
    why not. It applies where each warpgroup's products and softmax are its own (two warpgroups,
    each owning 64 rows of every dot's result on the mma row layout), the turn's two products are
    back to back across the turn boundary (the deferred P V then the next Q K^T: `Ring.defer`,
    exactly two streamed slices), and nothing in the loop body waits for the whole CTA: no CTA
    barrier is placed in it, and every statement is a tile statement on the row layout with no dot
    through shared scratch (those reduce or exchange through shared memory), a scalar `let` or a
    view only the dots read (`views`: ids of such view symbols); no nested loop, `if`, jump,
    atomic or barrier(). `facts`: the lowering's `Facts`; `routes`: id(statement) -> `Route`."""
    if not SWITCHES.stream_pingpong:
        return False, "off (TILENB_STREAM_PINGPONG=0)"
    if T != 256:
        return False, f"not with {T} threads: it needs two warpgroups (256 threads)"
    for rop in ring.ops:
        r = _route_of_dot(routes, rop.dot)
        lay = r.lay if r is not None else None
        if not (isinstance(lay, MmaLayout) and lay.rows_mode and lay.M == 128 and lay.W == 8 and lay.WN == 1):
            return False, ("its dots' rows do not split between the warpgroups (it needs results of 128 rows on "
                           "the mma row layout, 64 a warpgroup)")
    if len(ring.ops) != 2:
        return False, f"it streams {len(ring.ops)} slices (it needs two: Q K^T's and P V's)"
    if not ring.defer:
        return False, ("the turn's last product is waited for in its own turn (it needs that product to retire "
                       "at the next turn's first wait, so that the two products are issued back to back)")
    for t in ir.walk_stmts(list(ring.loop.body)):
        if facts.barriers.get(facts.positions.get(id(t))):
            return False, f"a CTA barrier is placed in the loop (at line {t.span.line})"
    for t in ring.loop.body:
        if isinstance(t, ir.Let) and (not isinstance(t.sym.type, ir.TileT) or id(t.sym) in views):
            continue
        if isinstance(t, (ir.Let, ir.VarDecl, ir.Assign)) and tile_statement(t):
            r = routes.get(id(t))
            if r is not None and r.lay is not None and not r.scratch and r.error is None and not facts.within(t):
                continue
        return False, (f"the statement at line {t.span.line} is not a tile statement on the row layout "
                       f"(it may wait for the whole CTA)")
    first = ring.ops[0]
    if SWITCHES.stream_pingpong == 1 and first.rows * first.cols < PAYING_PRODUCT:
        return False, (f"it would not pay: the streamed [{first.rows}, {first.cols}] slice gives each warpgroup's "
                       f"products too little work to hide the other's softmax (it pays from {PAYING_PRODUCT} "
                       f"elements, BC x D = 128 x 128, on the H200; TILENB_STREAM_PINGPONG=2 applies it anyway)")
    return True, (f"warpgroups 0 and 1 take turns issuing their products (named barriers "
                  f"{PINGPONG_BARRIERS[0]} and {PINGPONG_BARRIERS[1]}): one's P V and next Q K^T run on the "
                  f"tensor cores while the other computes its softmax")


def ring_waits(ring: Ring, positions) -> List[Wait]:
    """The waits the generated code makes in a streamed loop, at the top-level statement of its
    body that holds each dot: every warp waits on a slice's "full" mbarrier before the dot that
    reads it; thread 0 waits on a stage's "empty" mbarrier before it refills it (after the turn's
    first dot is issued); with the ping-pong, each warpgroup waits at its named barrier before its
    products. `positions`: id(statement) -> its pre-order index."""
    out: List[Wait] = []

    def stmt_of(d):
        for st in ring.loop.body:
            if any(x is d for e in ir.stmt_exprs(st) for x in ir.walk_expr(e)):
                return st
        return None
    S, A = ring.stages, ring.ahead
    b0, b1 = PINGPONG_BARRIERS
    for j, rop in enumerate(ring.ops):
        st = stmt_of(rop.dot)
        if st is None:
            continue
        line, pos = st.span.line, positions.get(id(st), -1)
        name = f"{rop.slice.base.name} [{rop.rows}, {rop.cols}]"
        out.append(Wait(line, pos, "within", "mbarrier", "every warp", f"full[stage][{j}]",
                        f"before the dot reads {name} of this turn: its TMA copy (issued by thread 0 {A} turn(s) "
                        f"ahead, into one of {S} stages) has landed"))
        if ring.pingpong and j in (0, len(ring.ops) - 1):
            turn = ("in turn 0 only: in later turns this Q K^T follows the previous turn's P V in the same "
                    "turn at the tensor cores" if j == 0 else "every turn")
            out.append(Wait(line, pos, "within", "named barrier", "each warpgroup",
                            f"named barrier {b0} (warpgroup 0) / {b1} (warpgroup 1)",
                            f"before this warpgroup issues its products ({turn}): warpgroup 0 waits at barrier "
                            f"{b0} until warpgroup 1 has issued its own and arrived there, warpgroup 1 at barrier "
                            f"{b1} the other way round, so that one warpgroup's softmax overlaps the other's "
                            f"tensor-core work (warpgroup ping-pong)"))
        if j == 0:
            freed = ("after the next turn's first product waited, which retires the last one too"
                     if ring.defer else "after the turn's last product")
            out.append(Wait(line, pos, "within", "mbarrier", "thread 0", "empty[stage]",
                            f"after this dot is issued, before thread 0 copies turn t + {A} (t: this turn) into "
                            f"the stage turn t + {A} - {S} used: every warp has freed it ({freed})"))
    return out
