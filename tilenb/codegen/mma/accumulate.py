"""One dot accumulated into tensor-core fragments: mma.sync m16n8k16, or wgmma in a streamed loop.

Guarantees: `mma_accumulate(g, d, out, lay)` adds dot(a, b) (or dot_t) to the f32 fragments
`out` in layout `lay`, K step by K step, with operand fragments masked along K where the valid K
range is not the whole of K; in a streamed loop on sm_90 the product is one wgmma group on the
ring's stage, retired where the analysis' `Ring.defer` allows.
"""
from __future__ import annotations

from typing import Optional

from ... import ir
from ...analysis.layout import PanelSwizzle, wgmma_panel_bytes
from ...analysis.mma_tiles import MmaLayout, shape2
from ...switches import SWITCHES

from .. import ctypes_ as C
from ..emitter import is_int
from ..generic import exprs
from ..sm90 import streamed
from ..values import At

from . import staging
from . import fragments as frags

def _wgmma_panel(src) -> Optional[int]:
    """For an ldmatrix source ("smem", ptr, pitch, swizzle, None, tile address): the bytes of one
    64-column panel when the tile is in wgmma's K-major layout (`layout.wgmma_panel_bytes`),
    else None."""
    if len(src) < 6 or src[5] is None:
        return None
    return wgmma_panel_bytes(src[3], src[2])


def mma_accumulate(g, d: ir.Dot, out: str, lay: MmaLayout):
    """out[slot] += dot(a, b) over the fragments this thread holds in `lay`."""
    M, K = shape2(d.a.type.shape)
    kind = "f16" if d.a.type.dtype == "f16" else "bf16"
    pack = C.pack2(kind)
    ar, br = exprs.region(g, d.a), exprs.region(g, d.b)
    exprs.prepare_regions(g, d.a)
    exprs.prepare_regions(g, d.b)
    sa = staging._source(g, d, d.a, "a", lay)
    sb = staging._source(g, d, d.b, "b", lay)
    # staging of tensor slices (double-buffered in their loop, or here; or a TMA ring on sm_90)
    now = []
    srcs = []
    ring = None
    for op, src in ((d.a, sa), (d.b, sb)):
        if src[0] == "stage" and src[1].ring:
            live = g.mma_live_loops[id(src[1].loop)]
            rop = g.stream.by_op[id(op)][1]
            ring = (live, rop, streamed.acquire(g, live, rop))
            src = ("ring",)
        elif src[0] == "stage":
            st = src[1]
            if st.loop is not None and id(st.loop) in g.mma_live_loops:
                ptr = staging._stage_pipelined(g, op, st)
            else:
                now.append((op, st))
                ptr = f"(tnb_smem + {g.low.stage_off(st)})"
            src = ("smem", f"(({C.STORE_C[st.dtype]}*)({ptr}))", st.pitch, None)
        srcs.append(src)
    if now:
        staging._stage_now(g, now)
    sa, sb = srcs
    kb = (br[2], br[3]) if d.trans_b else (br[0], br[1])
    klo, khi = exprs.intersect(g, (0, 1, ar[2], ar[3]), (0, 1, kb[0], kb[1]))[2:]
    static_full = is_int(klo) and is_int(khi) and klo <= 0 and khi >= K
    if ring is not None:
        g.emit(f"// tensor cores: wgmma m64n{lay.N}k16 {kind} -> f32 (A from registers), {frags._lay_text(g, lay)}; "
                  f"a from {staging._src_text(g, sa)}, b from the ring's stage")
    else:
        g.emit(f"// tensor cores: mma.sync m16n8k16 {kind} -> f32, {frags._lay_text(g, lay)}; "
                  f"a from {staging._src_text(g, sa)}, b from {staging._src_text(g, sb)}")
    if not static_full:
        kl, kh, kf = g.new("klo"), g.new("khi"), g.new("kfull")
        g.emit(f"const int {kl} = {klo}, {kh} = {khi};  // k valid in both a and b")
        g.emit(f"const bool {kf} = {kl} <= 0 && {kh} >= {K};")
        klo, khi = kl, kh
    guard = lay.used < lay.W
    g.emit("{")
    g.ind += 1
    if guard:
        g.emit(f"if (tnb_warp < {lay.used}) {{")
        g.ind += 1
    gd, tg = "(tnb_lane >> 2)", "(tnb_lane & 3)"
    wr, wc = g.new("wr"), g.new("wc")
    g.emit(f"const int {wr} = (tnb_warp / {lay.WN}) * {16 * lay.MT}, {wc} = (tnb_warp % {lay.WN}) * {8 * lay.NT};")
    # ldmatrix lane addresses: the element offset of this lane's row, and (unswizzled tiles) its
    # 32-bit shared address, to which each load adds a constant
    la = lb = None
    if sa[0] == "smem":
        la = g.new("la")
        g.emit(f"const int {la} = ({wr} + (tnb_lane & 7) + ((tnb_lane >> 3) & 1) * 8) * {sa[2]} + (tnb_lane >> 4) * 8;"
                  "  // a: this lane's ldmatrix row (element offset)")
        sa = staging._lane_base(g, sa, la)
    if sb[0] == "smem":
        lb = g.new("lb")
        if d.trans_b:
            g.emit(f"const int {lb} = ({wc} + (tnb_lane & 7) + (tnb_lane >> 4) * 8) * {sb[2]} + ((tnb_lane >> 3) & 1) * 8;"
                      "  // b [N, K]: this lane's ldmatrix row")
        else:
            g.emit(f"const int {lb} = ((tnb_lane & 7) + ((tnb_lane >> 3) & 1) * 8) * {sb[2]} + {wc} + (tnb_lane >> 4) * 8;"
                      "  // b [K, N]: this lane's ldmatrix.trans row")
        sb = staging._lane_base(g, sb, lb)
    bs = shape2(d.b.type.shape)
    MT, NT = lay.MT, lay.NT

    def smem_addr(src, lane_off, extra):
        sw = src[3]
        if len(src) > 4 and src[4] is not None:   # the lane's 32-bit address plus a constant
            return f"{src[4]} + ({extra}) * 2"
        o = f"({lane_off} + {extra})"
        if isinstance(sw, PanelSwizzle):
            o = f"({sw.c_expr(o)})"
        else:
            o = f"({o} ^ ((({o}) >> {sw.base + sw.shift}) & {(1 << sw.bits) - 1}) << {sw.base})"
        return f"{src[5]} + {o} * 2"

    def aval(i, k):
        cond = exprs.in_region(g, ar, i, k, (M, K))
        if cond is False:
            return "0.0f"
        v = C.convert(exprs.ev(g, d.a, At(i, k, None, None, False)), d.a.type.dtype, "f32")
        return v if cond is True else f"(({cond}) ? {v} : 0.0f)"

    def bval(k, n):
        i, j = (n, k) if d.trans_b else (k, n)
        cond = exprs.in_region(g, br, i, j, bs)
        if cond is False:
            return "0.0f"
        v = C.convert(exprs.ev(g, d.b, At(i, j, None, None, False)), d.b.type.dtype, "f32")
        return v if cond is True else f"(({cond}) ? {v} : 0.0f)"

    def load_a(fa: str, kk: str, k0: str):
        """The A fragments of K step kk for this warp's MT row blocks, into fa[mi * 4 + q]."""
        for mi in range(MT):
            regs = [f"{fa}[{mi * 4 + q}]" for q in range(4)]
            if sa[0] == "smem":
                g.emit(f"tnb_ldsm_x4({smem_addr(sa, la, f'{mi * 16 * sa[2]} + {kk} * 16')}, {', '.join(regs)});")
            elif sa[0] == "regs":
                tv = sa[1]
                ntp = tv.layout.NT
                w = f"({mi * ntp} + {kk} * 2) * 2"
                g.emit(f"{regs[0]} = {tv.cname}[{w}]; {regs[1]} = {tv.cname}[{w} + 1]; "
                          f"{regs[2]} = {tv.cname}[{w} + 2]; {regs[3]} = {tv.cname}[{w} + 3];")
            else:
                r0 = f"({wr} + {mi * 16} + {gd})"
                for q, (ri, ki) in enumerate(((r0, k0), (f"{r0} + 8", k0), (r0, f"{k0} + 8"), (f"{r0} + 8", f"{k0} + 8"))):
                    g.emit(f"{regs[q]} = {pack}({aval(ri, ki)}, {aval(ri, f'{ki} + 1')});")

    def mask_a(fa: str, k0: str):
        """The K-range masks of K step k0; A's fragments in fa ANDed with them. Returns the
        two mask names (k0 .. k0 + 7, k0 + 8 .. k0 + 15)."""
        ml, mh = g.new("ml"), g.new("mh")
        g.emit(f"const unsigned {ml} = tnb_kmask({k0}, {klo}, {khi}), {mh} = tnb_kmask({k0} + 8, {klo}, {khi});")
        if fa is not None:
            for mi in range(MT):
                g.emit(f"{fa}[{mi * 4}] &= {ml}; {fa}[{mi * 4 + 1}] &= {ml}; {fa}[{mi * 4 + 2}] &= {mh}; "
                          f"{fa}[{mi * 4 + 3}] &= {mh};")
        return ml, mh

    def wg_loop(masked: bool):
        """wgmma: every K step's A fragments first (wgmma reads them asynchronously), one
        fence, then the products of all K steps and row blocks, then wait for them. A shared
        tile already in the layout wgmma reads (`_wgmma_panel`) is read by descriptor instead,
        where it lies on a 1024-byte boundary (the 128-byte swizzle follows address bits)."""
        panel = (None if masked or not SWITCHES.wgmma_ss or sa[0] != "smem" or MT != 1 or lay.WN != 1
                 or not isinstance(d.a, ir.Ref) or not staging.wgmma_readable(g, d.a.sym) else _wgmma_panel(sa))
        if panel is None:
            wg_rs(masked)
            return
        g.emit(f"if (({sa[5]} & 1023) == 0) {{  // a is in wgmma's layout at a 1024-byte boundary: A by descriptor")
        g.ind += 1
        wg_ss(panel)
        g.ind -= 1
        g.emit("} else {  // A from registers, by ldmatrix")
        g.ind += 1
        wg_rs(masked)
        g.ind -= 1
        g.emit("}")

    def wg_ss(panel: int):
        """wgmma with A from shared memory by descriptor: this warpgroup's 64 rows of a, K step
        kk at panel kk / 4 (each `panel` bytes), 32 bytes in per step within it."""
        live, rop, addr = ring
        steps = K // 16
        g.emit("tnb_wgmma_fence();  // the accumulators written above are seen by wgmma")
        a0, d0 = g.new("da"), g.new("db")
        g.emit(f"const unsigned long long {a0} = tnb_gdesc({sa[5]} + (tnb_warp >> 2) * {64 * 128}, 16, 1024, 1);"
                  f"  // A's first k16 step: this warpgroup's 64 rows")
        g.emit(f"const unsigned long long {d0} = {streamed.b_desc(rop, addr)};  // B's first k16 step")
        kk = g.new("kk")
        g.emit("#pragma unroll")
        g.emit(f"for (int {kk} = 0; {kk} < {steps}; ++{kk}) {{")
        g.ind += 1
        g.emit(f"tnb_wgmma_{kind}_n{lay.N}_t{0 if d.trans_b else 1}(&{out}[0], {a0} + (unsigned long long)"
                  f"(((({kk}) / 4) * {panel} + (({kk}) % 4) * 32) >> 4), {d0} + {streamed.b_desc_step(rop, kk)});")
        g.ind -= 1
        g.emit("}")
        g.emit("tnb_wgmma_commit();")
        streamed.after_issue(g, live, rop)
        g.emit("tnb_wgmma_wait<0>();")
        g.emit(f"tnb_reg_fence<{lay.slots}>({out});  // no read of these registers moves above the wait")
        if rop is live["ring"].ops[0]:
            prev = streamed.deferred_fence(g, live["ring"])
            if prev:
                g.emit(f"{prev}  // and the last turn's product, retired by the same wait")

    def wg_rs(masked: bool):
        live, rop, addr = ring
        steps = K // 16
        own = sa[0] == "regs" and not masked     # the register tile itself is the A operand
        if own:
            tv = sa[1]
            fa, nfa = tv.cname, tv.layout.slots // 2

            def aword(kk, mi, q):
                return f"{fa}[({mi * tv.layout.NT} + ({kk}) * 2) * 2 + {q}]"
        else:
            fa, nfa = g.new("fa"), steps * MT * 4
            g.emit(f"unsigned {fa}[{nfa}];  // A fragments of every K step: read by wgmma until its wait")

            def aword(kk, mi, q):
                return f"{fa}[({kk}) * {MT * 4} + {mi * 4 + q}]"
            kk = g.new("kk")
            g.emit("#pragma unroll")
            g.emit(f"for (int {kk} = 0; {kk} < {steps}; ++{kk}) {{")
            g.ind += 1
            k0 = g.new("k0")
            g.emit(f"const int {k0} = {kk} * 16 + {tg} * 2;")
            fk = g.new("fk")
            g.emit(f"unsigned* const {fk} = &{fa}[{kk} * {MT * 4}];")
            load_a(fk, kk, k0)
            if masked:
                mask_a(fk, k0)
            g.ind -= 1
            g.emit("}")
        g.emit("tnb_wgmma_fence();  // the accumulators and A fragments written above are seen by wgmma")
        d0 = g.new("db")
        g.emit(f"const unsigned long long {d0} = {streamed.b_desc(rop, addr)};  // B's first k16 step")
        kk = g.new("kk")
        g.emit("#pragma unroll")
        g.emit(f"for (int {kk} = 0; {kk} < {steps}; ++{kk}) {{")
        g.ind += 1
        db = g.new("db")
        g.emit(f"const unsigned long long {db} = {d0} + {streamed.b_desc_step(rop, kk)};")
        fn = f"tnb_wgmma_rs_{kind}_n{lay.N}_t{0 if d.trans_b else 1}"
        for mi in range(MT):
            ws = ", ".join(aword(kk, mi, q) for q in range(4))
            g.emit(f"{fn}(&{out}[{mi * NT * 4}], {ws}, {db});")
        g.ind -= 1
        g.emit("}")
        g.emit("tnb_wgmma_commit();")
        streamed.after_issue(g, live, rop)
        if own and live["ring"].defer and rop is live["ring"].ops[-1]:
            # the turn's last dot accumulates in place and nothing reads its registers until
            # the next turn's first dot: it retires at that dot's wait (streamed.release)
            g.emit("// retires at the next turn's first wait, which covers it (wgmma groups retire in order)")
            return
        g.emit("tnb_wgmma_wait<0>();")
        g.emit(f"tnb_reg_fence<{lay.slots}>({out}); tnb_reg_fence_u<{nfa}>({fa});"
                  "  // no read of these registers moves above the wait")
        if rop is live["ring"].ops[0]:
            prev = streamed.deferred_fence(g, live["ring"])
            if prev:
                g.emit(f"{prev}  // and the last turn's product, retired by the same wait")

    def loop(masked: bool):
        if ring is not None:
            wg_loop(masked)
            return
        kk = g.new("kk")
        g.emit("#pragma unroll")
        g.emit(f"for (int {kk} = 0; {kk} < {K // 16}; ++{kk}) {{")
        g.ind += 1
        fa, fb = g.new("fa"), g.new("fb")
        g.emit(f"unsigned {fa}[{MT * 4}], {fb}[{NT * 2}];")
        k0 = g.new("k0")
        g.emit(f"const int {k0} = {kk} * 16 + {tg} * 2;")
        load_a(fa, kk, k0)
        ni = 0
        while ni < NT:
            if sb[0] == "smem":
                two = ni + 1 < NT
                regs = [f"{fb}[{ni * 2 + q}]" for q in range(4 if two else 2)]
                if d.trans_b:
                    extra = f"{ni * 8 * sb[2]} + {kk} * 16"
                else:
                    extra = f"{kk} * {16 * sb[2]} + {ni * 8}"
                fn = ("tnb_ldsm_x4" if two else "tnb_ldsm_x2") + ("" if d.trans_b else "_t")
                g.emit(f"{fn}({smem_addr(sb, lb, extra)}, {', '.join(regs)});")
                ni += 2 if two else 1
            else:
                n0 = f"({wc} + {ni * 8} + {gd})"
                for q, ki in enumerate((k0, f"{k0} + 8")):
                    g.emit(f"{fb}[{ni * 2 + q}] = {pack}({bval(ki, n0)}, {bval(f'{ki} + 1', n0)});")
                ni += 1
        if masked:
            ml, mh = mask_a(fa if sa[0] != "elem" else None, k0)
            if sb[0] != "elem":
                for n in range(NT):
                    g.emit(f"{fb}[{n * 2}] &= {ml}; {fb}[{n * 2 + 1}] &= {mh};")
        for mi in range(MT):
            for n in range(NT):
                g.emit(f"tnb_mma_{kind}(&{out}[{(mi * NT + n) * 4}], {fa}[{mi * 4}], {fa}[{mi * 4 + 1}], "
                          f"{fa}[{mi * 4 + 2}], {fa}[{mi * 4 + 3}], {fb}[{n * 2}], {fb}[{n * 2 + 1}]);")
        g.ind -= 1
        g.emit("}")

    if static_full:
        loop(False)
    else:
        g.emit(f"if ({kf}) {{  // the whole K range valid in a and b")
        g.ind += 1
        loop(False)
        g.ind -= 1
        g.emit("} else {  // fragments masked to the valid K range (invalid elements read as 0)")
        g.ind += 1
        loop(True)
        g.ind -= 1
        g.emit("}")
    if guard:
        g.ind -= 1
        g.emit("}")
    g.ind -= 1
    g.emit("}")
    if ring is not None:
        streamed.retire_previous(g, ring[0], ring[1])
        streamed.release(g, ring[0], ring[1])
    return ar, br
