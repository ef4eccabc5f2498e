"""Training FLOPs per step, from the configs and the batch shape: what "equal compute" means when
ELECTRA is compared with BERT (the ELECTRA paper compares its models at equal pretraining FLOPs).

The count is of matrix products only, forward and backward:
  - a product (m, k) @ (k, n) is 2 m k n FLOPs (a multiply and an add per term);
  - a training step is 3x the forward: the backward of each product is two products of the same
    size (d input and d weight), the usual estimate;
  - attention is included: q @ k^T and att @ v are 2 B T^2 C each per layer (NH heads of HS = C / NH);
  - not counted: the embeddings' gathers (table lookups, no arithmetic worth counting), LayerNorm,
    GELU, softmax, dropout, the losses and the optimizer (all O(N C) or O(params), small next to
    the products at these sizes).

Which heads run, and where:
  BERT (MLM + NSP)  the MLM head at the P predicted positions of each sequence (minibert gathers
                    them before the head, as Google's code): dense C -> C, tied decoder C -> V;
                    the pooler C -> C and the NSP classifier C -> 2 on [CLS].
  ELECTRA           generator: its E -> C_g projection (when E != C_g), its blocks, its MLM head at
                    the P masked positions: dense C_g -> E, tied decoder E -> V;
                    discriminator: its E -> C projection (when E != C), its blocks, the RTD head at
                    EVERY position: dense C -> C, then C -> 1.
Every sequence is counted at its full length T (padding included), as a padded batch runs.

    >>> from minibert.model import BertConfig
    >>> f = bert_flops(BertConfig(vocab_size=3, hidden_size=2, num_hidden_layers=1, num_attention_heads=1,
    ...                           intermediate_size=4), B=1, T=2, P=1)
    >>> f["forward"], f["train"]
    (196, 588)
"""
from __future__ import annotations

from minibert.family.electra import ElectraConfig
from minibert.model import BertConfig


def matmul(m: int, k: int, n: int) -> int:
    """FLOPs of one (m, k) @ (k, n) product."""
    return 2 * m * k * n


def encoder_flops(B: int, T: int, C: int, FF: int, L: int) -> dict[str, int]:
    """The forward FLOPs of L of BERT's blocks on B sequences of T tokens, by kind."""
    N = B * T  # tokens
    per_layer = {"qkv": matmul(N, C, 3 * C),  # x @ [Wq | Wk | Wv]
                 "scores": 2 * B * T * T * C,  # q @ k^T, every head: B NH (T, HS) @ (HS, T)
                 "context": 2 * B * T * T * C,  # att @ v, every head: B NH (T, T) @ (T, HS)
                 "attn_out": matmul(N, C, C),
                 "ffn": matmul(N, C, FF) + matmul(N, FF, C)}
    return {k: L * v for k, v in per_layer.items()}


def bert_flops(cfg, B: int, T: int, P: int) -> dict[str, int]:
    """A BERT MLM + NSP training step (cfg: BertConfig): forward FLOPs by part, "forward" their sum,
    "train" = 3 x forward. P: predictions per sequence (max_predictions_per_seq)."""
    C, V = cfg.hidden_size, cfg.vocab_size
    parts = {"encoder": sum(encoder_flops(B, T, C, cfg.intermediate_size, cfg.num_hidden_layers).values()),
             "mlm_head": matmul(B * P, C, C) + matmul(B * P, C, V),  # transform, then the tied decoder
             "nsp_head": matmul(B, C, C) + matmul(B, C, 2)}  # pooler, then the classifier
    parts["forward"] = sum(parts.values())
    parts["train"] = 3 * parts["forward"]
    return parts


def electra_flops(gen_cfg, disc_cfg, B: int, T: int, P: int) -> dict[str, int]:
    """An ELECTRA training step (ElectraConfigs of the generator and the discriminator, sharing the
    E-wide embedding): forward FLOPs by part, "forward", "train" = 3 x forward, and the two
    networks' training FLOPs ("generator_train", "discriminator_train")."""
    E, V, N = disc_cfg.embedding_size, disc_cfg.vocab_size, B * T
    Cg, C = gen_cfg.hidden_size, disc_cfg.hidden_size
    gen = {"gen_projection": matmul(N, E, Cg) if E != Cg else 0,
           "gen_encoder": sum(encoder_flops(B, T, Cg, gen_cfg.intermediate_size, gen_cfg.num_hidden_layers).values()),
           "gen_mlm_head": matmul(B * P, Cg, E) + matmul(B * P, E, V)}  # dense C_g -> E, tied decoder E -> V
    disc = {"disc_projection": matmul(N, E, C) if E != C else 0,
            "disc_encoder": sum(encoder_flops(B, T, C, disc_cfg.intermediate_size,
                                              disc_cfg.num_hidden_layers).values()),
            "rtd_head": matmul(N, C, C) + matmul(N, C, 1)}  # every position: dense, then one logit
    parts = {**gen, **disc}
    parts["forward"] = sum(parts.values())
    parts["train"] = 3 * parts["forward"]
    parts["generator_train"], parts["discriminator_train"] = 3 * sum(gen.values()), 3 * sum(disc.values())
    return parts


def tiny_comparison(B: int = 32, T: int = 64, P: int = 10, V: int = 8192) -> str:
    """One line: BERT-tiny (the tiny preset) vs ELECTRA-tiny (discriminator = the tiny preset's
    sizes with E = C = 128; generator hidden 32, intermediate 128, 2 layers, 1 head), per training step
    at the train-tiny recipe's batch (B 32, T 64, P 10)."""
    bert = BertConfig(vocab_size=V, hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512)
    disc = ElectraConfig(vocab_size=V, embedding_size=128, hidden_size=128, num_hidden_layers=2,
                         num_attention_heads=2, intermediate_size=512)
    gen = ElectraConfig(vocab_size=V, embedding_size=128, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=1, intermediate_size=128)  # as the electra-tiny preset's generator
    b, e = bert_flops(bert, B, T, P), electra_flops(gen, disc, B, T, P)
    g = 1e9
    return (f"per training step (B {B}, T {T}, P {P}, V {V}): BERT-tiny {b['train'] / g:.3f} GFLOP; "
            f"ELECTRA-tiny {e['train'] / g:.3f} GFLOP (generator {e['generator_train'] / g:.3f} + "
            f"discriminator {e['discriminator_train'] / g:.3f}) = {e['train'] / b['train']:.3f}x BERT-tiny; "
            f"equal FLOPs: {b['train'] / e['train']:.3f} ELECTRA steps per BERT step")


if __name__ == "__main__":
    print(tiny_comparison())
