"""`python -m tilenb list` of a kernel with several @autotune variants says which variant its
figures are of (the first that fits, the one a plain `kernel.ir()` and the views use) and which
variants were left out for their shared memory."""
from tilenb.__main__ import main

SKIPS = """@autotune(T in [256, 32], C in [64])
@launch(128)
kernel big(X: tensor<f32>[M, 64]) {
  var t: tile<f32>[T, C] = X[0 :+ T, :]
  X[0 :+ T, :] = t
}

@autotune(T in [8, 16])
@launch(128)
kernel small(X: tensor<f32>[M, 64]) {
  var t: tile<f32>[T, 64] = X[0 :+ T, :]
  X[0 :+ T, :] = t
}

@autotune(T in [8])
@launch(128)
kernel one(X: tensor<f32>[M, 64]) {
  X[0 :+ T, :] = X[0 :+ T, :]
}
"""


def test_list_names_the_variant_of_its_figures_and_the_skipped_ones(tmp_path, capsys):
    f = tmp_path / "k.tile"
    f.write_text(SKIPS)
    assert main(["list", str(f)]) == 0
    lines = capsys.readouterr().out.splitlines()
    big = lines[lines.index("  big(X: tensor<f32>[M, 64])") + 1]
    assert "shared memory 8192 B" in big                                  # 32 x 64 f32: the T=32 variant
    assert big.endswith("@autotune T in [256, 32], C in [64] (figures at T=32, C=64; skipped, over the "
                        "shared-memory budget: T=256, C=64)"), big
    small = lines[lines.index("  small(X: tensor<f32>[M, 64])") + 1]
    assert "shared memory 2048 B" in small and small.endswith("@autotune T in [8, 16] (figures at T=8)"), small
    one = lines[lines.index("  one(X: tensor<f32>[M, 64])") + 1]
    assert one.endswith("@autotune T in [8]"), one
