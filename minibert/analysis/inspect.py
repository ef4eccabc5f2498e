"""Look inside a trained model: fill in [MASK]s and draw attention maps.

`fill_mask(model, tokenizer, text, k)`, `attention_maps(model, tokenizer, text)` and
`plot_attention(maps, out_dir)`, used by the lessons and by the commands `fill-mask` and
`attention` (tools/look_inside.py).

About the literal "[MASK]": Google's tokenizer (which minibert follows) has no special-token
handling, so "[MASK]" in text becomes "[", "mask", "]". We split the text at each literal
"[MASK]", tokenize the pieces and put the mask id between them ourselves.
"""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np

from minibert import layers
from minibert.io import outputs

MASK_MARKER = "[MASK]"
# Beyond ~128 tokens the per-token labels of an attention map are unreadable, and the figures
# grew with T (600 words gave 211-Mpixel PNGs in 76 s); maps of longer text stay available as
# numbers from attention_maps().
MAX_PLOT_TOKENS = 128
MAX_PANEL_INCHES = 30.0  # one head's map: <= 30 in * 90 dpi = 2700 px a side
MAX_ROW_INCHES = 60.0  # a layer's heads side by side: <= 5400 px wide
DPI = 90


def encode_with_masks(tokenizer, text: str, max_length: int = 512) -> tuple[list[int], list[int]]:
    """Text with literal [MASK] markers -> ([CLS] ... [SEP] ids, indices of the masks)."""
    pieces = text.split(MASK_MARKER)
    ids = [tokenizer.cls_id]
    positions = []
    for i, piece in enumerate(pieces):
        ids += tokenizer.convert_tokens_to_ids(tokenizer.tokenize(piece))
        if i < len(pieces) - 1:
            positions.append(len(ids))
            ids.append(tokenizer.mask_id)
    ids.append(tokenizer.sep_id)
    if len(ids) > max_length:
        raise ValueError(f"text is {len(ids)} tokens long; the model takes at most {max_length}")
    return ids, positions


def _softmax(x: np.ndarray) -> np.ndarray:
    z = x - x.max(axis=-1, keepdims=True)  # (..., V)
    e = np.exp(z)  # (..., V)
    return e / e.sum(axis=-1, keepdims=True)  # (..., V)


def fill_mask(model, tokenizer, text: str, k: int = 5) -> list[list[tuple[str, float]]]:
    """Top-k (token, probability) for each [MASK] in `text`, in order. ValueError if none, or
    if k is not in 1..vocab size (k=0 printed nothing, k=-1 the whole vocabulary but one)."""
    V = model.config.vocab_size
    if not (isinstance(k, (int, np.integer)) and 1 <= k <= V):
        raise ValueError(f"k={k} predictions per [MASK]: k must be between 1 and the vocabulary "
                         f"size {V}")
    ids, positions = encode_with_masks(tokenizer, text, model.config.max_position_embeddings)
    if not positions:
        raise ValueError(f"no {MASK_MARKER} in {text!r}; put [MASK] where a word should be predicted")
    out = model.forward(np.array([ids]))  # mlm_logits (1, T, V)
    probs = _softmax(out.mlm_logits[0, positions].astype(np.float64))  # (M, V)
    result = []
    for row in probs:
        top = np.argsort(-row, kind="stable")[:k]  # (k,)
        result.append([(tokenizer.ids_to_tokens[int(i)], float(row[i])) for i in top])
    return result


class AttentionMaps(NamedTuple):
    tokens: list[str]  # (T,)
    maps: np.ndarray  # (L, NH, T, T) attention probabilities, row = query, column = key


def attention_maps(model, tokenizer, text: str, text_pair: str | None = None) -> AttentionMaps:
    """Attention probabilities of every layer and head for one sentence (or pair), no dropout.

    Runs the encoder with the NumPy reference layers (minibert.layers), whose attention cache
    holds the softmax probabilities `att` (B, NH, T, T). Text longer than the model's
    max_position_embeddings is a ValueError, not silently cut."""
    cfg = model.config
    ids, segments = tokenizer.encode(text, text_pair)  # never truncated: a cut text would be
    if len(ids) > cfg.max_position_embeddings:  # maps of a sentence the user did not write
        raise ValueError(f"the text is {len(ids)} tokens long ([CLS] and [SEP] included); the "
                         f"model takes at most {cfg.max_position_embeddings} "
                         "(max_position_embeddings)")
    ids_a = np.array([ids])  # (1, T)
    seg = np.array([segments])  # (1, T)
    mask = np.ones_like(ids_a)  # (1, T)
    # the model class's own encoder (ALBERT's applies its one shared block L times)
    _, cache = type(model).encoder_forward(model.params, cfg, ids_a, seg, mask, None, layers)
    maps = np.stack([block.attn.att[0] for block in cache.blocks])  # (L, NH, T, T)
    return AttentionMaps(tokenizer.convert_ids_to_tokens(ids), maps)


def figure_sizes(T: int, NH: int) -> tuple[float, float, bool]:
    """(inches of one head's own PNG, inches of a head in the layer PNG, token labels there?).

    A head's map grows with T so every label stays readable (0.22 in per token), up to
    MAX_PANEL_INCHES; a layer's row of NH maps is shrunk to MAX_ROW_INCHES and drops the
    labels when they no longer fit (the per-head PNGs keep them). So no PNG exceeds
    2700 x 2700 or 5400 x 2700 pixels.
    """
    readable = max(3.0, 0.22 * T + 1.5)
    head = min(readable, MAX_PANEL_INCHES)
    in_row = min(head, MAX_ROW_INCHES / NH)
    return head, in_row, in_row >= readable


def draw_attention(fig, ax, m: np.ndarray, tokens: list[str] | None, title: str):
    """One head's (T, T) map on `ax` of `fig`, with a colour bar (0 to 1) that marks the uniform
    weight 1/T: a head that spreads evenly is then told apart from one that attends nowhere.
    `tokens` labels the axes (None: no labels)."""
    T = m.shape[0]
    im = ax.imshow(m, cmap="viridis", vmin=0.0, vmax=1.0)
    if tokens is not None:
        ax.set_xticks(range(T))
        ax.set_yticks(range(T))
        ax.set_xticklabels(tokens, rotation=90, fontsize=7)
        ax.set_yticklabels(tokens, fontsize=7)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query")
    ax.set_title(title)
    bar = fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    bar.set_label("attention weight", fontsize=8)
    bar.ax.axhline(1.0 / T, color="white", lw=1.5)
    bar.ax.text(1.6, 1.0 / T, f"1/T = {1.0 / T:.2f}", transform=bar.ax.get_yaxis_transform(), va="center",
                fontsize=7)
    return im


def draw_layer(fig, result: AttentionMaps, layer: int, labels: bool = True) -> None:
    """All heads of one layer side by side on `fig` (a pyplot or a plain Figure)."""
    L, NH, T, _ = result.maps.shape
    for head in range(NH):
        draw_attention(fig, fig.add_subplot(1, NH, head + 1), result.maps[layer, head],
                       result.tokens if labels else None, f"layer {layer} head {head}")


def plot_attention(result: AttentionMaps, out_dir: str | Path) -> list[Path]:
    """One PNG per layer (all heads side by side) plus one per head; returns the paths.

    Refuses more than MAX_PLOT_TOKENS tokens: the labels would be unreadable."""
    # lazy: keeps matplotlib out of the start of `python -m minibert attention` and 9 more
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    L, NH, T, _ = result.maps.shape
    if T > MAX_PLOT_TOKENS:
        raise ValueError(f"the text is {T} tokens long ([CLS] and [SEP] included); attention "
                         f"plots are readable up to {MAX_PLOT_TOKENS} tokens: shorten the text to "
                         "a sentence or two (minibert.analysis.inspect.attention_maps gives the numbers "
                         "for longer text)")
    out_dir = Path(out_dir)
    names = [name for layer in range(L) for name in (f"layer{layer}.png", *(f"layer{layer}_head{h}.png"
                                                                            for h in range(NH)))]
    for name in names:  # every file checked before the first is drawn: a link or a FIFO among them writes nothing
        outputs.inside_output(out_dir, out_dir / name)
    outputs.make_dir(out_dir)
    size, size_in_row, labels_in_row = figure_sizes(T, NH)
    paths = []
    for layer in range(L):
        fig = Figure(figsize=(size_in_row * NH, size_in_row))
        FigureCanvasAgg(fig)
        draw_layer(fig, result, layer, labels_in_row)
        fig.tight_layout()
        paths.append(outputs.save_figure(fig, out_dir / f"layer{layer}.png", root=out_dir, dpi=DPI))
        for head in range(NH):
            fig = Figure(figsize=(size, size))
            FigureCanvasAgg(fig)
            draw_attention(fig, fig.add_subplot(1, 1, 1), result.maps[layer, head], result.tokens,
                           f"layer {layer} head {head}")
            fig.tight_layout()
            paths.append(outputs.save_figure(fig, out_dir / f"layer{layer}_head{head}.png", root=out_dir, dpi=DPI))
    return paths
