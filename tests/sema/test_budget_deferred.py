"""The budget check that needs a variant's whole analysis (what its tensor-core dots add to the
tiles, `tilenb.sema.budget`) runs when the variant is first asked for, with the outcome of
running it at compile time: the same variants kept, in order, the same ones skipped with the
same reason, and a program in which none fits still an error at compile time.

The reference is the rule itself, computed here from the analysis: a variant is skipped when
the shared-memory map for any GPU and Hopper's are both over the per-block limit of the largest
GPUs."""
import re

import pytest

import tilenb
import tilenb.api
from tilenb.analysis import analyze
from tilenb.examples import suite_kernels as SK
from tilenb.lang.diagnostics import TileBudgetError, TileNameError
from tilenb.target import ANY


@pytest.fixture(autouse=True)
def _fresh():
    tilenb.api.clear_caches()      # a compile of the same text would reuse a settled program
    yield
    tilenb.api.clear_caches()


SPACE = "@autotune(BR in [64, 128], BC in [64, 128], D in [64, 128], NT in [128, 256])"
# head dim 256: some variants need more shared memory than any GPU gives a CTA (since the
# accumulator of `acc = acc * r + dot` lives in registers, every suite variant at 64 and 128 fits)
WIDE = "@autotune(BR in [64, 128], BC in [64, 128], D in [256], NT in [128, 256])"


def _attention(space: str = WIDE) -> str:
    text = SK.kernel_text("attention_bf16")
    assert SPACE in text
    return text.replace(SPACE, space)


def _over(kir) -> bool:
    return all(analyze(kir, arch=a).smem.footprint > ANY.dynamic_smem for a in (None, "sm_90"))


def test_a_variant_is_analysed_when_asked_for_and_the_outcome_is_the_rules():
    ck = tilenb.compile(_attention(), backend="cpu").attention_bf16.checked
    every = dict(ck._variants)             # everything that checked, before any pending check ran
    assert ck._pending, "the attention kernel has variants whose budget only the analysis settles"
    first = next(iter(every))
    assert ck.default_tune() == dict(first) and first not in ck._pending
    over = [k for k, kir in every.items() if _over(kir)]     # the rule, computed here
    assert over, "the attention kernel has variants over the budget"
    big = over[0]
    assert big in ck._pending
    named = ", ".join(f"{n}={v}" for n, v in big)
    with pytest.raises(TileNameError, match=re.escape(named) + r" was skipped: kernel 'attention_bf16' "
                                            r"needs \d+ bytes of shared memory"):
        ck.variant(**dict(big))
    assert big not in ck._pending and big in ck._skipped
    want_kept = [k for k, kir in every.items() if not _over(kir)]
    want_skipped = [k for k, kir in every.items() if _over(kir)]
    assert want_skipped and want_kept
    assert list(ck.variants) == want_kept            # in @autotune order
    assert list(ck.skipped) == want_skipped and not ck._pending
    assert all("what its tensor-core dots need" in ck.skipped[k] for k in want_skipped)


def test_when_no_variant_fits_the_compile_fails():
    ck = tilenb.compile(_attention(), backend="cpu").attention_bf16.checked
    big = dict(next(k for k, kir in dict(ck._variants).items() if _over(kir)))
    tilenb.api.clear_caches()
    text = _attention("@autotune(" + ", ".join(f"{n} in [{v}]" for n, v in big.items()) + ")")
    assert f"BR in [{big['BR']}]" in text
    with pytest.raises(TileBudgetError, match=r"kernel 'attention_bf16' needs \d+ bytes of shared memory: .*what "
                                              r"its tensor-core dots need \(K staging"):
        tilenb.compile(text, backend="cpu")


def test_a_launch_of_a_named_variant_settles_only_that_variant():
    ck = tilenb.compile(SK.kernel_text("attention_bf16"), backend="cpu").attention_bf16.checked
    pending = set(ck._pending)
    tune = dict(sorted(pending)[0])
    ck.variant(**tune)
    assert set(ck._pending) == pending - {tuple(sorted(tune.items()))}
