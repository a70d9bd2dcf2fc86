"""One dot accumulated into tensor-core fragments: mma.sync m16n8k16, or wgmma in a streamed loop.

Guarantees: `mma_accumulate(g, d, out, lay)` adds dot(a, b) (or dot_t) to the f32 fragments
`out` in layout `lay`, K step by K step, with operand fragments masked along K where the valid K
range is not the whole of K; in a streamed loop on sm_90 the product is one wgmma group on the
ring's stage, retired where the analysis' `Ring.defer` allows.
"""
from __future__ import annotations

from dataclasses import dataclass
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
    sa = staging.operand_source(g, d, d.a, "a", lay)
    sb = staging.operand_source(g, d, d.b, "b", lay)
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
                ptr = staging.stage_pipelined(g, op, st)
            else:
                now.append((op, st))
                ptr = f"(tnb_smem + {g.low.stage_off(st)})"
            src = ("smem", f"(({C.STORE_C[st.dtype]}*)({ptr}))", st.pitch, None)
        srcs.append(src)
    if now:
        staging.stage_now(g, now)
    sa, sb = srcs
    kb = (br[2], br[3]) if d.trans_b else (br[0], br[1])
    klo, khi = exprs.intersect(g, (0, 1, ar[2], ar[3]), (0, 1, kb[0], kb[1]))[2:]
    static_full = is_int(klo) and is_int(khi) and klo <= 0 and khi >= K
    if ring is not None:
        g.emit(f"// tensor cores: wgmma m64n{lay.N}k16 {kind} -> f32 (A from registers), {frags.layout_text(g, lay)}; "
                  f"a from {staging.describe_source(g, sa)}, b from the ring's stage")
    else:
        g.emit(f"// tensor cores: mma.sync m16n8k16 {kind} -> f32, {frags.layout_text(g, lay)}; "
                  f"a from {staging.describe_source(g, sa)}, b from {staging.describe_source(g, sb)}")
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
        sa = staging.lane_base(g, sa, la)
    if sb[0] == "smem":
        lb = g.new("lb")
        if d.trans_b:
            g.emit(f"const int {lb} = ({wc} + (tnb_lane & 7) + (tnb_lane >> 4) * 8) * {sb[2]} + ((tnb_lane >> 3) & 1) * 8;"
                      "  // b [N, K]: this lane's ldmatrix row")
        else:
            g.emit(f"const int {lb} = ((tnb_lane & 7) + ((tnb_lane >> 3) & 1) * 8) * {sb[2]} + {wc} + (tnb_lane >> 4) * 8;"
                      "  // b [K, N]: this lane's ldmatrix.trans row")
        sb = staging.lane_base(g, sb, lb)
    bs = shape2(d.b.type.shape)
    MT, NT = lay.MT, lay.NT

    w = _Products(g=g, d=d, out=out, lay=lay, kind=kind, pack=pack, M=M, K=K, MT=MT, NT=NT, ar=ar, br=br,
                  bs=bs, sa=sa, sb=sb, la=la, lb=lb, wr=wr, wc=wc, gd=gd, tg=tg, klo=klo, khi=khi, ring=ring)
    if static_full:
        w.loop(False)
    else:
        g.emit(f"if ({kf}) {{  // the whole K range valid in a and b")
        g.ind += 1
        w.loop(False)
        g.ind -= 1
        g.emit("} else {  // fragments masked to the valid K range (invalid elements read as 0)")
        g.ind += 1
        w.loop(True)
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


@dataclass
class _Products:
    """The K loop of one dot's products (`mma_accumulate`): mma.sync m16n8k16 for each K step,
    or in a streamed loop on sm_90 one wgmma group (A from registers, or by descriptor from a
    shared tile in wgmma's layout). Fields: what the set-up decided, read by every part."""
    g: object                 # the generation state (context.Gen)
    d: ir.Dot
    out: str                  # the f32 accumulator fragments' array
    lay: MmaLayout            # their layout (the warp grid of 16 x 8 blocks)
    kind: str                 # "f16" or "bf16"
    pack: str                 # the C function packing two values into a word
    M: int
    K: int
    MT: int                   # 16-row blocks a warp
    NT: int                   # 8-column blocks a warp
    ar: tuple                 # a's valid region
    br: tuple                 # b's valid region
    bs: tuple                 # b's shape
    sa: tuple                 # a's source (mma.staging.operand_source, with the lane's base)
    sb: tuple                 # b's source
    la: object                # a's lane row offset (ldmatrix), or None
    lb: object                # b's lane row offset, or None
    wr: str                   # this warp's first row
    wc: str                   # this warp's first column
    gd: str                   # the lane's group (lane >> 2)
    tg: str                   # the lane within its group (lane & 3)
    klo: object               # K valid in both operands: [klo, khi)
    khi: object
    ring: object              # (live ring, RingOp, stage address) in a streamed loop on sm_90, else None

    def smem_addr(self, src, lane_off, extra):
        sw = src[3]
        if len(src) > 4 and src[4] is not None:   # the lane's 32-bit address plus a constant
            return f"{src[4]} + ({extra}) * 2"
        o = f"({lane_off} + {extra})"
        if isinstance(sw, PanelSwizzle):
            o = f"({sw.c_expr(o)})"
        else:
            o = f"({o} ^ ((({o}) >> {sw.base + sw.shift}) & {(1 << sw.bits) - 1}) << {sw.base})"
        return f"{src[5]} + {o} * 2"

    def aval(self, i, k):
        cond = exprs.in_region(self.g, self.ar, i, k, (self.M, self.K))
        if cond is False:
            return "0.0f"
        v = C.convert(exprs.ev(self.g, self.d.a, At(i, k, None, None, False)), self.d.a.type.dtype, "f32")
        return v if cond is True else f"(({cond}) ? {v} : 0.0f)"

    def bval(self, k, n):
        i, j = (n, k) if self.d.trans_b else (k, n)
        cond = exprs.in_region(self.g, self.br, i, j, self.bs)
        if cond is False:
            return "0.0f"
        v = C.convert(exprs.ev(self.g, self.d.b, At(i, j, None, None, False)), self.d.b.type.dtype, "f32")
        return v if cond is True else f"(({cond}) ? {v} : 0.0f)"

    def load_a(self, fa: str, kk: str, k0: str):
        """The A fragments of K step kk for this warp's MT row blocks, into fa[mi * 4 + q]."""
        for mi in range(self.MT):
            regs = [f"{fa}[{mi * 4 + q}]" for q in range(4)]
            if self.sa[0] == "smem":
                self.g.emit(f"tnb_ldsm_x4({self.smem_addr(self.sa, self.la, f'{mi * 16 * self.sa[2]} + {kk} * 16')}, {', '.join(regs)});")
            elif self.sa[0] == "regs":
                tv = self.sa[1]
                ntp = tv.layout.NT
                w = f"({mi * ntp} + {kk} * 2) * 2"
                self.g.emit(f"{regs[0]} = {tv.cname}[{w}]; {regs[1]} = {tv.cname}[{w} + 1]; "
                          f"{regs[2]} = {tv.cname}[{w} + 2]; {regs[3]} = {tv.cname}[{w} + 3];")
            else:
                r0 = f"({self.wr} + {mi * 16} + {self.gd})"
                for q, (ri, ki) in enumerate(((r0, k0), (f"{r0} + 8", k0), (r0, f"{k0} + 8"), (f"{r0} + 8", f"{k0} + 8"))):
                    self.g.emit(f"{regs[q]} = {self.pack}({self.aval(ri, ki)}, {self.aval(ri, f'{ki} + 1')});")

    def mask_a(self, fa: str, k0: str):
        """The K-range masks of K step k0; A's fragments in fa ANDed with them. Returns the
        two mask names (k0 .. k0 + 7, k0 + 8 .. k0 + 15)."""
        ml, mh = self.g.new("ml"), self.g.new("mh")
        self.g.emit(f"const unsigned {ml} = tnb_kmask({k0}, {self.klo}, {self.khi}), {mh} = tnb_kmask({k0} + 8, {self.klo}, {self.khi});")
        if fa is not None:
            for mi in range(self.MT):
                self.g.emit(f"{fa}[{mi * 4}] &= {ml}; {fa}[{mi * 4 + 1}] &= {ml}; {fa}[{mi * 4 + 2}] &= {mh}; "
                          f"{fa}[{mi * 4 + 3}] &= {mh};")
        return ml, mh

    def wg_loop(self, masked: bool):
        """wgmma: every K step's A fragments first (wgmma reads them asynchronously), one
        fence, then the products of all K steps and row blocks, then wait for them. A shared
        tile already in the layout wgmma reads (`_wgmma_panel`) is read by descriptor instead,
        where it lies on a 1024-byte boundary (the 128-byte swizzle follows address bits)."""
        panel = (None if masked or not SWITCHES.wgmma_ss or self.sa[0] != "smem" or self.MT != 1 or self.lay.WN != 1
                 or not isinstance(self.d.a, ir.Ref) or not staging.wgmma_readable(self.g, self.d.a.sym) else _wgmma_panel(self.sa))
        if panel is None:
            self.wg_rs(masked)
            return
        self.g.emit(f"if (({self.sa[5]} & 1023) == 0) {{  // a is in wgmma's layout at a 1024-byte boundary: A by descriptor")
        self.g.ind += 1
        self.wg_ss(panel)
        self.g.ind -= 1
        self.g.emit("} else {  // A from registers, by ldmatrix")
        self.g.ind += 1
        self.wg_rs(masked)
        self.g.ind -= 1
        self.g.emit("}")

    def wg_ss(self, panel: int):
        """wgmma with A from shared memory by descriptor: this warpgroup's 64 rows of a, K step
        kk at panel kk / 4 (each `panel` bytes), 32 bytes in per step within it."""
        live, rop, addr = self.ring
        steps = self.K // 16
        streamed.before_issue(self.g, live, rop)
        self.g.emit("tnb_wgmma_fence();  // the accumulators written above are seen by wgmma")
        a0, d0 = self.g.new("da"), self.g.new("db")
        self.g.emit(f"const unsigned long long {a0} = tnb_gdesc({self.sa[5]} + (tnb_warp >> 2) * {64 * 128}, 16, 1024, 1);"
                  f"  // A's first k16 step: this warpgroup's 64 rows")
        self.g.emit(f"const unsigned long long {d0} = {streamed.b_desc(rop, addr)};  // B's first k16 step")
        kk = self.g.new("kk")
        self.g.emit("#pragma unroll")
        self.g.emit(f"for (int {kk} = 0; {kk} < {steps}; ++{kk}) {{")
        self.g.ind += 1
        self.g.emit(f"tnb_wgmma_{self.kind}_n{self.lay.N}_t{0 if self.d.trans_b else 1}(&{self.out}[0], {a0} + (unsigned long long)"
                  f"(((({kk}) / 4) * {panel} + (({kk}) % 4) * 32) >> 4), {d0} + {streamed.b_desc_step(rop, kk)});")
        self.g.ind -= 1
        self.g.emit("}")
        self.g.emit("tnb_wgmma_commit();")
        streamed.after_issue(self.g, live, rop)
        self.g.emit("tnb_wgmma_wait<0>();")
        self.g.emit(f"tnb_reg_fence<{self.lay.slots}>({self.out});  // no read of these registers moves above the wait")
        if rop is live["ring"].ops[0]:
            prev = streamed.deferred_fence(self.g, live["ring"])
            if prev:
                self.g.emit(f"{prev}  // and the last turn's product, retired by the same wait")

    def wg_rs(self, masked: bool):
        live, rop, addr = self.ring
        steps = self.K // 16
        own = self.sa[0] == "regs" and not masked     # the register tile itself is the A operand
        if own:
            tv = self.sa[1]
            fa, nfa = tv.cname, tv.layout.slots // 2

            def aword(kk, mi, q):
                return f"{fa}[({mi * tv.layout.NT} + ({kk}) * 2) * 2 + {q}]"
        else:
            fa, nfa = self.g.new("fa"), steps * self.MT * 4
            self.g.emit(f"unsigned {fa}[{nfa}];  // A fragments of every K step: read by wgmma until its wait")

            def aword(kk, mi, q):
                return f"{fa}[({kk}) * {self.MT * 4} + {mi * 4 + q}]"
            kk = self.g.new("kk")
            self.g.emit("#pragma unroll")
            self.g.emit(f"for (int {kk} = 0; {kk} < {steps}; ++{kk}) {{")
            self.g.ind += 1
            k0 = self.g.new("k0")
            self.g.emit(f"const int {k0} = {kk} * 16 + {self.tg} * 2;")
            fk = self.g.new("fk")
            self.g.emit(f"unsigned* const {fk} = &{fa}[{kk} * {self.MT * 4}];")
            self.load_a(fk, kk, k0)
            if masked:
                self.mask_a(fk, k0)
            self.g.ind -= 1
            self.g.emit("}")
        streamed.before_issue(self.g, live, rop)
        self.g.emit("tnb_wgmma_fence();  // the accumulators and A fragments written above are seen by wgmma")
        d0 = self.g.new("db")
        self.g.emit(f"const unsigned long long {d0} = {streamed.b_desc(rop, addr)};  // B's first k16 step")
        kk = self.g.new("kk")
        self.g.emit("#pragma unroll")
        self.g.emit(f"for (int {kk} = 0; {kk} < {steps}; ++{kk}) {{")
        self.g.ind += 1
        db = self.g.new("db")
        self.g.emit(f"const unsigned long long {db} = {d0} + {streamed.b_desc_step(rop, kk)};")
        fn = f"tnb_wgmma_rs_{self.kind}_n{self.lay.N}_t{0 if self.d.trans_b else 1}"
        for mi in range(self.MT):
            ws = ", ".join(aword(kk, mi, q) for q in range(4))
            self.g.emit(f"{fn}(&{self.out}[{mi * self.NT * 4}], {ws}, {db});")
        self.g.ind -= 1
        self.g.emit("}")
        self.g.emit("tnb_wgmma_commit();")
        streamed.after_issue(self.g, live, rop)
        if own and live["ring"].defer and rop is live["ring"].ops[-1]:
            # the turn's last dot accumulates in place and nothing reads its registers until
            # the next turn's first dot: it retires at that dot's wait (streamed.release)
            self.g.emit("// retires at the next turn's first wait, which covers it (wgmma groups retire in order)")
            return
        self.g.emit("tnb_wgmma_wait<0>();")
        self.g.emit(f"tnb_reg_fence<{self.lay.slots}>({self.out}); tnb_reg_fence_u<{nfa}>({fa});"
                  "  // no read of these registers moves above the wait")
        if rop is live["ring"].ops[0]:
            prev = streamed.deferred_fence(self.g, live["ring"])
            if prev:
                self.g.emit(f"{prev}  // and the last turn's product, retired by the same wait")

    def loop(self, masked: bool):
        if self.ring is not None:
            self.wg_loop(masked)
            return
        kk = self.g.new("kk")
        self.g.emit("#pragma unroll")
        self.g.emit(f"for (int {kk} = 0; {kk} < {self.K // 16}; ++{kk}) {{")
        self.g.ind += 1
        fa, fb = self.g.new("fa"), self.g.new("fb")
        self.g.emit(f"unsigned {fa}[{self.MT * 4}], {fb}[{self.NT * 2}];")
        k0 = self.g.new("k0")
        self.g.emit(f"const int {k0} = {kk} * 16 + {self.tg} * 2;")
        self.load_a(fa, kk, k0)
        ni = 0
        while ni < self.NT:
            if self.sb[0] == "smem":
                two = ni + 1 < self.NT
                regs = [f"{fb}[{ni * 2 + q}]" for q in range(4 if two else 2)]
                if self.d.trans_b:
                    extra = f"{ni * 8 * self.sb[2]} + {kk} * 16"
                else:
                    extra = f"{kk} * {16 * self.sb[2]} + {ni * 8}"
                fn = ("tnb_ldsm_x4" if two else "tnb_ldsm_x2") + ("" if self.d.trans_b else "_t")
                self.g.emit(f"{fn}({self.smem_addr(self.sb, self.lb, extra)}, {', '.join(regs)});")
                ni += 2 if two else 1
            else:
                n0 = f"({self.wc} + {ni * 8} + {self.gd})"
                for q, ki in enumerate((k0, f"{k0} + 8")):
                    self.g.emit(f"{fb}[{ni * 2 + q}] = {self.pack}({self.bval(ki, n0)}, {self.bval(f'{ki} + 1', n0)});")
                ni += 1
        if masked:
            ml, mh = self.mask_a(fa if self.sa[0] != "elem" else None, k0)
            if self.sb[0] != "elem":
                for n in range(self.NT):
                    self.g.emit(f"{fb}[{n * 2}] &= {ml}; {fb}[{n * 2 + 1}] &= {mh};")
        for mi in range(self.MT):
            for n in range(self.NT):
                self.g.emit(f"tnb_mma_{self.kind}(&{self.out}[{(mi * self.NT + n) * 4}], {fa}[{mi * 4}], {fa}[{mi * 4 + 1}], "
                          f"{fa}[{mi * 4 + 2}], {fa}[{mi * 4 + 3}], {fb}[{n * 2}], {fb}[{n * 2 + 1}]);")
        self.g.ind -= 1
        self.g.emit("}")
