"""The in-memory caches: values derived from a kernel variant are kept beside its KernelIR (never
on it), for as long as it lives, and `tilenb.api.clear_caches()` forgets every registered cache."""
from __future__ import annotations

import dataclasses
import gc
import weakref

import numpy as np

import tilenb
import tilenb.api
from tilenb import caches
from tilenb.analysis import analyze
from tilenb.analysis.lifetimes import gemm_accumulators, tile_lifetimes
from tilenb.lang.diagnostics import Source
from tilenb.lang.parser import parse
from tilenb.runtime.cpu.unwritten import origins_of
from tilenb.sema.check import check_program

SOURCE = """
@launch(128)
@autotune(BM in [16, 32])
kernel scale(X: tensor<f32>[M, 24], Y: tensor<f32>[M, 24]) {
  let r = ctx.block.x * BM
  var x = X[r :+ BM, :]
  var y = x * 2.0 + 1.0
  Y[r :+ BM, :] = y
}
"""


def _variants(text=SOURCE):
    """Fresh KernelIRs, made outside tilenb.compile's cache of checked programs."""
    prog = check_program(parse(text, "<t>", 0), Source(text, "<t>", 0))
    return list(prog.kernels["scale"].variants.values())


def test_derived_values_are_kept_beside_the_ir_not_on_it():
    kir = _variants()[0]
    fields = {f.name for f in dataclasses.fields(kir)}
    a = analyze(kir)
    lt, accs, orig = tile_lifetimes(kir), gemm_accumulators(kir), origins_of(kir)
    assert set(vars(kir)) == fields                      # nothing stashed on the frozen IR
    assert analyze(kir) is a and tile_lifetimes(kir) is lt and origins_of(kir) is orig
    assert gemm_accumulators(kir) == accs and gemm_accumulators(kir) is not accs   # a new list each call
    other = _variants()[0]                               # equal text, another object: its own values
    assert analyze(other) is not a and analyze(other).footprint == a.footprint


def test_clear_caches_forgets_them_and_the_next_answer_is_the_same():
    kir = _variants()[1]
    a, lt = analyze(kir), tile_lifetimes(kir)
    tilenb.api.clear_caches()
    b = analyze(kir)
    assert b is not a and tile_lifetimes(kir) is not lt
    assert (b.footprint, b.budget, [t.name for t in b.tiles]) == (a.footprint, a.budget, [t.name for t in a.tiles])
    assert b.json_text() == a.json_text()


def _freed(prepare) -> bool:
    """Whether fresh KernelIRs are collected once `prepare(kir)` ran on each and they are dropped."""
    kirs = _variants()
    refs = [weakref.ref(k) for k in kirs]
    for k in kirs:
        prepare(k)
    del kirs, k
    gc.collect()
    return all(r() is None for r in refs)


def test_the_cache_does_not_keep_a_kernel_alive():
    assert _freed(lambda k: (tile_lifetimes(k), gemm_accumulators(k), origins_of(k)))
    # an Analysis refers to its KernelIR (the lowering's facts), so it is freed by clear_caches
    assert _freed(lambda k: (analyze(k), tilenb.api.clear_caches()))


def test_clear_caches_reaches_every_registered_cache_and_a_compile_starts_cold():
    calls = []
    caches.register("tests.runtime.test_caches", lambda: calls.append(1))
    import tilenb.codegen.nvrtc  # noqa: F401  (registers itself on import)
    names = caches.registered()
    assert {"tilenb.api", "tilenb.caches.per_kernel", "tilenb.codegen.nvrtc", "tests.runtime.test_caches"} <= set(names)
    m1 = tilenb.compile(SOURCE, backend="cpu")
    assert tilenb.compile(SOURCE, backend="cpu").scale.checked is m1.scale.checked   # the checked program is reused
    tilenb.api.clear_caches()
    assert calls == [1]
    m2 = tilenb.compile(SOURCE, backend="cpu")
    assert m2.scale.checked is not m1.scale.checked
    X = np.arange(37 * 24, dtype=np.float32).reshape(37, 24) / 7
    for m in (m1, m2):                                    # a module compiled before keeps working
        Y = np.zeros_like(X)
        m.scale[3](X, Y, variant={"BM": 16})
        np.testing.assert_allclose(Y[:37], X * 2 + 1, rtol=1e-6)


def test_registering_a_name_again_replaces_it():
    seen = []
    caches.register("tests.runtime.test_caches.again", lambda: seen.append("old"))
    caches.register("tests.runtime.test_caches.again", lambda: seen.append("new"))
    assert caches.registered().count("tests.runtime.test_caches.again") == 1
    caches.clear_all()
    assert seen == ["new"]
