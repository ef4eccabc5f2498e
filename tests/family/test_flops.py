"""minibert/family/flops.py against hand counts on tiny configs (every product written out)."""
from minibert.family import flops
from minibert.family.electra import ElectraConfig
from minibert.model import BertConfig


def test_bert_flops_hand_count():
    """B 1, T 2 (N = 2 tokens), C 2, FF 4, L 1, V 3, P 1; a product (m, k) @ (k, n) is 2 m k n."""
    cfg = BertConfig(vocab_size=3, hidden_size=2, num_hidden_layers=1, num_attention_heads=1, intermediate_size=4)
    f = flops.bert_flops(cfg, B=1, T=2, P=1)
    qkv = 2 * 2 * 2 * 6  # (2, 2) @ (2, 6)
    scores = context = 2 * 2 * 2 * 2  # (2, 2) @ (2, 2): q k^T, then att v (one head of size 2)
    attn_out = 2 * 2 * 2 * 2  # (2, 2) @ (2, 2)
    ffn = 2 * 2 * 2 * 4 + 2 * 2 * 4 * 2  # (2, 2) @ (2, 4), (2, 4) @ (4, 2)
    assert f["encoder"] == qkv + scores + context + attn_out + ffn == 160
    assert f["mlm_head"] == 2 * 1 * 2 * 2 + 2 * 1 * 2 * 3  # one prediction: transform (2, 2), decoder (2, 3)
    assert f["nsp_head"] == 2 * 1 * 2 * 2 + 2 * 1 * 2 * 2  # pooler (2, 2), classifier (2, 2)
    assert f["forward"] == 160 + 20 + 16
    assert f["train"] == 3 * 196


def test_attention_grows_with_t_squared_and_heads_do_not_matter():
    a = flops.encoder_flops(B=2, T=8, C=16, FF=32, L=1)
    b = flops.encoder_flops(B=2, T=16, C=16, FF=32, L=1)
    assert b["scores"] == 4 * a["scores"] and b["qkv"] == 2 * a["qkv"]
    one = BertConfig(vocab_size=10, hidden_size=16, num_hidden_layers=2, num_attention_heads=1, intermediate_size=32)
    four = BertConfig(vocab_size=10, hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=32)
    assert flops.bert_flops(one, 2, 8, 2) == flops.bert_flops(four, 2, 8, 2)


def test_electra_flops_hand_count():
    """B 1, T 2, E 2; generator C_g 1, FF 2, L 1; discriminator C 3, FF 4, L 1; V 5, P 1."""
    gen = ElectraConfig(vocab_size=5, embedding_size=2, hidden_size=1, num_hidden_layers=1, num_attention_heads=1,
                        intermediate_size=2)
    disc = ElectraConfig(vocab_size=5, embedding_size=2, hidden_size=3, num_hidden_layers=1, num_attention_heads=1,
                         intermediate_size=4)
    f = flops.electra_flops(gen, disc, B=1, T=2, P=1)
    # generator: projection (2, 2) @ (2, 1); block at C 1, FF 2; head at 1 position: (1, 1) @ (1, 2), (1, 2) @ (2, 5)
    gen_block = 2 * 2 * 1 * 3 + 2 * 2 * 2 * 1 * 2 + 2 * 2 * 1 * 1 + 2 * 2 * 1 * 2 * 2
    assert f["gen_projection"] == 2 * 2 * 2 * 1
    assert f["gen_encoder"] == gen_block == 12 + 16 + 4 + 16
    assert f["gen_mlm_head"] == 2 * 1 * 1 * 2 + 2 * 1 * 2 * 5
    # discriminator: projection (2, 2) @ (2, 3); block at C 3, FF 4; RTD head at both positions: (2, 3) @ (3, 3), (3, 1)
    disc_block = 2 * 2 * 3 * 9 + 2 * 2 * 2 * 2 * 3 + 2 * 2 * 3 * 3 + 2 * 2 * 3 * 4 * 2
    assert f["disc_projection"] == 2 * 2 * 2 * 3
    assert f["disc_encoder"] == disc_block == 108 + 48 + 36 + 96
    assert f["rtd_head"] == 2 * 2 * 3 * 3 + 2 * 2 * 3 * 1
    forward = 8 + 48 + 24 + 24 + 288 + 48
    assert f["forward"] == forward and f["train"] == 3 * forward
    assert f["generator_train"] + f["discriminator_train"] == f["train"]


def test_no_projection_when_the_embedding_is_as_wide_as_the_hidden_state():
    cfg = ElectraConfig(vocab_size=10, embedding_size=8, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16)
    assert flops.electra_flops(cfg, cfg, 2, 4, 1)["disc_projection"] == 0


def test_tiny_comparison_line():
    line = flops.tiny_comparison()
    assert "\n" not in line and line.startswith("per training step (B 32, T 64, P 10, V 8192): BERT-tiny ")
