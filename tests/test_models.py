"""Properties every registered model must have, checked on tiny sizes for each variant at once."""
import copy
import json
import pickle
from pathlib import Path

import pytest
import torch

from helpers.models import (
    BOS,
    DECODERS,
    ENCODERS,
    EOS,
    HYBRIDS,
    PAD,
    RNN,
    SEPARATE,
    TINY_VARIANTS,
    TRANSFORMER,
    V_SOURCE,
    V,
    attends,
    make_tiny_model,
)
from nmtbench.config import ConfigError, DecodeConfig
from nmtbench.decoding.search import greedy
from nmtbench.decoding.translator import Translator
from nmtbench.models import cnn, cnn_config, rnn, rnn_config, transformer, transformer_config
from nmtbench.models.attention import SCORERS
from nmtbench.models.family import TABLE, Family, register, with_halves
from nmtbench.models.hybrid import pair_class
from nmtbench.models.hybrid_config import halves
from nmtbench.models.interface import DecoderState
from nmtbench.models.registry import FAMILIES, build_model
from nmtbench.models.transformer_config import NORMS, POSITIONS, SELF_ATTENTION
from nmtbench.models.vocabulary import ModelConfig, Vocab
from nmtbench.models.vocabulary_layers import VocabularySeq2Seq

HALVES = with_halves()
PAIRS = {(encoder, decoder): pair_class(HALVES[encoder], HALVES[decoder]) for encoder in HALVES for decoder in HALVES
         if encoder != decoder}  # every hybrid pair of the built-in families, derived from the family table
ATTENTIVE = [name for name in TINY_VARIANTS if attends(name)]


def batch(seed=1):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, V, (3, 7), generator=g)
    src[1, 5:] = PAD  # one shorter sentence
    tgt = torch.randint(4, V, (3, 6), generator=g)
    return src, src != PAD, tgt


def step_by_step(model, src, mask, tgt):
    state = model.init_state(model.encode(src, mask), mask)
    out, attention = [], []
    for t in range(tgt.size(1)):
        log_probs, state = model.decode_step(state, tgt[:, t])
        out.append(log_probs)
        attention.append(state.attention)
    return torch.stack(out, 1), attention


@pytest.mark.parametrize("name", TINY_VARIANTS)
def test_decode_step_equals_teacher_forcing(name):
    model = make_tiny_model(name)
    src, mask, tgt = batch()
    forced = model(src, mask, tgt).log_softmax(-1)
    stepped, _ = step_by_step(model, src, mask, tgt)
    assert torch.allclose(stepped, forced, atol=1e-5)


@pytest.mark.parametrize("name", TINY_VARIANTS)
def test_causality(name):
    model = make_tiny_model(name)
    src, mask, tgt = batch()
    changed = tgt.clone()
    changed[:, 3:] = (changed[:, 3:] + 1) % V
    a, b = model(src, mask, tgt), model(src, mask, changed)
    assert torch.allclose(a[:, :3], b[:, :3], atol=1e-6)
    assert not torch.allclose(a[:, 3:], b[:, 3:])


@pytest.mark.parametrize("name", TINY_VARIANTS)
def test_extra_source_padding_changes_nothing(name):
    model = make_tiny_model(name)
    src, mask, tgt = batch()
    padded = torch.cat([src, torch.full((3, 4), PAD)], dim=1)
    assert torch.allclose(model(src, mask, tgt), model(padded, padded != PAD, tgt), atol=1e-5)


@pytest.mark.parametrize("name", ATTENTIVE)
def test_attention_is_a_distribution_over_real_source_tokens(name):
    model = make_tiny_model(name)
    src, mask, tgt = batch()
    _, attention = step_by_step(model, src, mask, tgt)
    for weights in attention:  # (B, S), or (B, S + t) for a decoder-only stream over source and target
        assert torch.allclose(weights.sum(-1), torch.ones(3), atol=1e-5)
        assert (weights[:, : mask.size(1)][~mask] == 0).all()


@pytest.mark.parametrize("name", TINY_VARIANTS)
def test_every_parameter_gets_a_gradient(name):
    model = make_tiny_model(name).train()
    src, mask, tgt = batch()
    model(src, mask, tgt).logsumexp(-1).sum().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert missing == []


@pytest.mark.parametrize("name", TINY_VARIANTS)
def test_tiny_model_memorises_ten_pairs(name):
    g = torch.Generator().manual_seed(3)
    src = torch.randint(4, V, (10, 5), generator=g)
    tgt = torch.randint(4, V, (10, 4), generator=g)
    mask = src != PAD
    tgt_in = torch.cat([torch.full((10, 1), BOS), tgt], 1)
    tgt_out = torch.cat([tgt, torch.full((10, 1), EOS)], 1)
    model = make_tiny_model(name)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(12):  # up to 300 updates, stopping as soon as every target comes back
        model.train()
        for _ in range(25):
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(src, mask, tgt_in).flatten(0, 1), tgt_out.flatten())
            loss.backward()
            optimizer.step()
        hyps = greedy(model.eval(), src, mask, BOS, EOS, torch.full((10,), 8))
        if hyps == tgt.tolist():
            break
    assert hyps == tgt.tolist()


def test_bidirectional_encoder_sees_the_future_and_unidirectional_does_not():
    src, mask, _ = batch()
    changed = src.clone()
    changed[:, 4] = (changed[:, 4] + 1) % V + 4 * (changed[:, 4] + 1 >= V)
    for bidirectional, future_visible in ((True, True), (False, False)):
        torch.manual_seed(0)
        model = build_model("m", {**RNN, "bidirectional": bidirectional}, Vocab.of(V, pad_id=PAD)).eval()
        before = model.encode(src, mask)["enc"][:, :4]
        after = model.encode(changed, mask)["enc"][:, :4]
        assert (not torch.allclose(before, after)) == future_visible


@pytest.mark.parametrize("block, message", [
    ({"family": "lstm"},
     "models.bad.family: 'lstm' is not valid; choose one of cnn, decoder_only, hybrid, rnn, transformer"),
    ({"family": "rnn", "cell": "elman"}, "models.bad.cell: 'elman' is not valid; choose one of rnn, gru, lstm"),
    ({"family": "rnn", "attention": "luong"}, "choose one of none, dot, general, reduced_rank, additive"),
    ({"family": "transformer", "positions": "rotary"}, "choose one of sinusoidal, learned, relative"),
    ({"family": "cnn", "kernel": 4}, "models.bad.kernel: must be odd"),
    ({"family": "decoder_only", "positions": "relative"},
     "models.bad.positions: 'relative' is not valid; choose one of sinusoidal, learned"),
    ({"family": "transformer", "d_model": 10, "heads": 4}, "d_model (10) must be divisible by heads (4)"),
    ({"family": "transformer", "self_attention": "bigbird"}, "choose one of full, linformer, sparse"),
    ({"family": "transformer", "window": 4},
     "models.bad.window: only read when self_attention is sparse; remove it or set self_attention: sparse"),
    ({"family": "transformer", "self_attention": "sparse", "linformer_k": 8},
     "models.bad.linformer_k: only read when self_attention is linformer"),
    ({"family": "transformer", "self_attention": "linformer", "linformer_sharing": "all"},
     "choose one of none, headwise, key_value, layerwise"),
    ({"family": "transformer", "self_attention": "sparse", "positions": "relative"},
     "models.bad.positions: relative positions need self_attention full"),
    ({"family": "transformer", "self_attention": "sparse", "block_size": 0}, "block_size must be positive"),
    ({"family": "decoder_only", "self_attention": "linformer"}, "'linformer' is not valid; choose one of full"),
    ({"family": "rnn", "hidden": 5}, "unknown key(s) hidden"),
    ({"family": "cnn", "tie_embeddings": "source_output"},
     "models.bad.tie_embeddings: 'source_output' is not valid; choose one of all, source_target, target_output, none"),
    ({"family": "rnn", "attentional_dim": 20}, "models.bad.attentional_dim: 20 is not embed_dim (256), but "
     "tie_embeddings unset makes the output layer the target embedding; set tie_embeddings: none or source_target, "
     "or attentional_dim: null"),
    ({"family": "rnn", "attentional_dim": 20, "tie_embeddings": "target_output"},
     "models.bad.attentional_dim: 20 is not embed_dim (256), but tie_embeddings target_output makes the output"),
    ({"family": "rnn", "layers": "two"}, "models.bad.layers: expected int, got 'two'"),
    ({"family": "hybrid", "encoder": {"family": "decoder_only"}, "decoder": DECODERS["rnn"]},
     "models.bad.encoder.family: decoder_only has no encoder and decoder halves of its own to pair; choose one of "
     "cnn, rnn, transformer, or family: decoder_only for the whole model"),
    ({"family": "hybrid", "encoder": ENCODERS["rnn"], "decoder": {"family": "hybrid"}},
     "models.bad.decoder.family: hybrid has no encoder and decoder halves of its own to pair; choose one of cnn, "
     "rnn, transformer, or family: hybrid for the whole model"),
    ({"family": "hybrid", "encoder": ENCODERS["cnn"], "decoder": {"family": "bag_gru:BagGRU"}},
     "models.bad.decoder.family: 'bag_gru:BagGRU' is not valid; choose one of cnn, rnn, transformer"),
    ({"family": "hybrid", "encoder": ENCODERS["rnn"]},
     "models.bad.decoder: missing; a hybrid needs both halves, each a block of its family's keys, e.g. decoder: "
     "{family: rnn, cell: lstm, attention: general}"),
    ({"family": "hybrid", "decoder": DECODERS["cnn"]},
     "models.bad.encoder: missing; a hybrid needs both halves, each a block of its family's keys, e.g. encoder: "
     "{family: transformer, layers: 6}"),
    ({"family": "hybrid", "encoder": ENCODERS["rnn"], "decoder": {"cell": "lstm"}},
     "models.bad.decoder: missing 'family'; choose one of cnn, rnn, transformer"),
    ({"family": "hybrid", "encoder": ENCODERS["transformer"], "decoder": DECODERS["transformer"]},
     "models.bad.decoder.family: transformer is the encoder's family too, which is family: transformer itself; "
     "choose one of cnn, rnn, or family: transformer"),
    ({"family": "hybrid", "encoder": ENCODERS["cnn"], "decoder": {**DECODERS["rnn"], "init_hidden": "last"}},
     "models.bad.decoder.init_hidden: last takes a recurrent encoder's final state, which a cnn encoder does not "
     "have; choose bridge (learned from the mean of its states) or zero"),
    ({"family": "rnn", "init_hidden": "first"},
     "models.bad.init_hidden: 'first' is not valid; choose one of last, bridge, zero"),
    ({"family": "rnn", "init_hidden": "zero", "attention": "none"},
     "models.bad.init_hidden: zero with attention none leaves the decoder no way to the source"),
    ({"family": "hybrid", "encoder": ENCODERS["cnn"], "decoder": {**DECODERS["rnn"], "attention": "none"}},
     "models.bad.decoder.attention: none leaves a recurrent decoder after a cnn encoder no way to the source"),
    ({"family": "hybrid", "encoder": ENCODERS["transformer"], "decoder": {**DECODERS["rnn"], "bidirectional": True}},
     "models.bad.decoder.bidirectional: not a key of the rnn family's decoder; remove it (it reads cell, layers, "
     "embed_dim, hidden_dim, attention, attention_rank, input_feeding, attentional_dim, init_hidden, "
     "target_embedding_dropout, layer_dropout, context_dropout, output_dropout)"),
    ({"family": "hybrid", "encoder": {**ENCODERS["transformer"], "decoder_window": 2}, "decoder": DECODERS["cnn"]},
     "models.bad.encoder.decoder_window: not a key of the transformer family's encoder"),
    ({"family": "hybrid", "encoder": {**ENCODERS["rnn"], "dropout": 0.3}, "decoder": DECODERS["cnn"]},
     "models.bad.encoder.dropout: set once for the whole model, as models.bad.dropout; remove it here"),
    ({"family": "hybrid", "encoder": {**ENCODERS["rnn"], "cell": "elman"}, "decoder": DECODERS["cnn"]},
     "models.bad.encoder.cell: 'elman' is not valid; choose one of rnn, gru, lstm"),
    ({"family": "hybrid", "encoder": {**ENCODERS["rnn"], "embed_dim": 8}, "decoder": DECODERS["cnn"]},
     "models.bad.tie_embeddings: unset (all, with one joint vocabulary) makes the source and the target embedding "
     "one matrix, but the encoder reads 8-wide embeddings and the decoder 16-wide; give both halves one width, or "
     "set tie_embeddings: target_output or none"),
    ({"family": "hybrid", "encoder": ENCODERS["rnn"], "decoder": DECODERS["cnn"], "dropout": 1.0},
     "models.bad.dropout: must be in [0, 1), got 1.0"),
])
def test_bad_model_blocks_are_refused_with_the_valid_choices(block, message):
    with pytest.raises(ConfigError) as error:
        build_model("bad", block, Vocab.of(V, pad_id=PAD))
    assert message in str(error.value)


@pytest.mark.parametrize("family", ["rnn", "transformer", "decoder_only", "cnn"])
@pytest.mark.parametrize("tie", ["all", "source_target"])
def test_a_shared_source_and_target_embedding_is_refused_with_one_vocabulary_per_side(family, tie):
    with pytest.raises(ConfigError) as error:
        build_model("m", {"family": family, "tie_embeddings": tie}, Vocab.of(V_SOURCE, V, PAD))
    assert str(error.value) == (
        f"models.m.tie_embeddings: {tie} makes the source and the target embedding one matrix, which needs one joint "
        "vocabulary, but the tokenize stage makes one per side (tokenize.joint: false); set tie_embeddings: "
        "target_output or none, or tokenize.joint: true")


# The tiny Transformer has 11,136 parameters besides its vocabulary layers (d 16); each vocabulary matrix adds
# pieces x 16: one of 20 (all), two (source_target: source = target, and output; target_output: source, and
# target = output), three (none), the source's of 23 with one vocabulary per side. The tiny GRU: 3,996 and
# pieces x 12; a_t of 20 instead of 12 (attentional_dim) widens the input feed (3 gates x 16 x 8), the layer
# making a_t (32 x 8 + 8) and the output layer (20 x 8).
@pytest.mark.parametrize("block, vocab, params", [
    (TRANSFORMER, Vocab.of(V, pad_id=PAD), 11_136 + 20 * 16),
    ({**TRANSFORMER, "tie_embeddings": "target_output"}, Vocab.of(V, pad_id=PAD), 11_136 + 2 * 20 * 16),
    ({**TRANSFORMER, "tie_embeddings": "source_target"}, Vocab.of(V, pad_id=PAD), 11_136 + 2 * 20 * 16),
    ({**TRANSFORMER, "tie_embeddings": "none"}, Vocab.of(V, pad_id=PAD), 11_136 + 3 * 20 * 16),
    (TRANSFORMER, Vocab.of(V_SOURCE, V, PAD), 11_136 + 23 * 16 + 20 * 16),  # null: target_output
    ({**TRANSFORMER, "tie_embeddings": "none"}, Vocab.of(V_SOURCE, V, PAD), 11_136 + 23 * 16 + 2 * 20 * 16),
    ({**RNN, "cell": "gru"}, Vocab.of(V, pad_id=PAD), 3_996 + 20 * 12),
    ({**RNN, "cell": "gru", "tie_embeddings": "target_output"}, Vocab.of(V, pad_id=PAD), 3_996 + 2 * 20 * 12),
    ({**RNN, "cell": "gru", "tie_embeddings": "none"}, Vocab.of(V_SOURCE, V, PAD), 3_996 + 23 * 12 + 2 * 20 * 12),
    ({**RNN, "cell": "gru", "tie_embeddings": "none", "attentional_dim": 20}, Vocab.of(V_SOURCE, V, PAD),
     3_996 + 23 * 12 + 2 * 20 * 12 + 3 * 16 * 8 + (32 * 8 + 8) + 20 * 8),
    ({**RNN, "cell": "gru", "tie_embeddings": "source_target", "attentional_dim": 20}, Vocab.of(V, pad_id=PAD),
     3_996 + 20 * 12 + 20 * 12 + 3 * 16 * 8 + (32 * 8 + 8) + 20 * 8),
])
def test_parameter_counts_follow_tie_embeddings_and_the_vocabularies(block, vocab, params):
    assert build_model("m", block, vocab).num_parameters() == params


@pytest.mark.parametrize("name", sorted(SEPARATE))
def test_one_vocabulary_per_side_reads_source_ids_and_writes_target_logits(name):
    """Source ids up to V_SOURCE - 1, which the target vocabulary does not have; logits over the V target pieces."""
    model = make_tiny_model(name)
    src, mask, tgt = batch()
    src[0, :3] = torch.tensor([V, V + 1, V_SOURCE - 1])
    forced = model(src, mask, tgt)
    assert forced.shape == (3, 6, V)
    stepped, _ = step_by_step(model, src, mask, tgt)
    assert torch.allclose(stepped, forced.log_softmax(-1), atol=1e-5)


@pytest.mark.parametrize("name", TINY_VARIANTS)
def test_saved_weights_reload_into_a_fresh_model_and_keep_their_ties(name):
    model, fresh = make_tiny_model(name, seed=0), make_tiny_model(name, seed=1)
    fresh.load_state_dict(model.state_dict())
    src, mask, tgt = batch()
    assert torch.equal(fresh(src, mask, tgt), model(src, mask, tgt))
    tie = getattr(fresh, "tie", None)  # a built-in family's tying; the own model's table is its own
    if tie is not None:
        assert (fresh.output.weight is fresh.target_table().weight) == (tie in ("all", "target_output"))
        assert (fresh.target_table() is fresh.embed) == (tie in ("all", "source_target"))


@pytest.mark.parametrize("name, longest, room", [
    ("transformer_learned", 32, 32),
    ("transformer_linformer", 16, None),
    ("transformer_sparse", 16, None),
    ("decoder_only_prefix_learned", 256, 256),  # one stream of 512 for the source and its translation
    ("cnn", 512, 512),
    ("hybrid_transformer_cnn", 512, 512),  # sinusoids read any source, but its decoder places 512 tokens
    ("hybrid_cnn_rnn", 512, None),
])
def test_the_longest_source_a_model_translates_is_decoded_to_the_end_of_its_positions(name, longest, room):
    """A source of longest_source tokens decodes through its whole budget, cut to longest_target, without one of the
    model's own position checks firing; one token more is refused, naming the sentence, before any decoding."""
    model = make_tiny_model(name)
    assert (model.longest_source(), model.longest_target(longest)) == (longest, room)
    translator = Translator(model, None, DecodeConfig(beam=1, max_len_a=1.0, max_len_b=3, min_len=10**6))
    source = [4 + i % 16 for i in range(longest)]
    (hyps,) = translator.translate_ids([source])
    assert len(hyps[0].tokens) == min(longest + 3, room or longest + 3)
    with pytest.raises(ValueError, match=rf"^sentence 2 has {longest + 1} tokens, more than the {longest} this model "
                                         r"translates \(max_positions of its model block\)"):
        translator.translate_ids([source, [*source, 4]])


@pytest.mark.parametrize("name", ["rnn_dot", "transformer_post", "transformer_relative", "decoder_only"])
def test_a_model_without_a_position_table_translates_any_length(name):
    model = make_tiny_model(name)
    assert (model.longest_source(), model.longest_target(10**6)) == (None, None)


def test_relative_attention_logits_depend_only_on_distance():
    from nmtbench.models.transformer import RelativePositions

    torch.manual_seed(0)
    relative = RelativePositions(d_head=4, clip=3)
    q = torch.randn(2, 2, 5, 4)  # (B, h, T, d/h)
    at_start = relative(q, torch.arange(5), torch.arange(5))
    shifted = relative(q, torch.arange(40, 45), torch.arange(40, 45))
    assert torch.equal(at_start, shifted)
    far = relative(q, torch.arange(5), torch.arange(5) + 10)  # every distance beyond the clip
    assert torch.allclose(far, far[..., :1].expand_as(far))



def test_sparse_pattern_sees_the_window_the_global_tokens_and_its_random_block():
    from nmtbench.models.efficient_attention import SparsePattern

    key_mask = torch.tensor([[True] * 6 + [False] * 2])  # a sentence of 6 tokens, padded to 8
    table = torch.tensor([[2], [0], [1], [3]])  # query block b sees key block table[b], blocks of 2 tokens
    pattern = SparsePattern(key_mask, 1, 1, global_tokens=1, table=table, block_size=2)
    window = torch.arange(8)[:, None] - 1 + torch.arange(3)  # (S, 3) keys i-1, i, i+1
    keys = torch.cat([window, torch.zeros(8, 1, dtype=torch.long), pattern.random[0]], dim=1)
    seen = [sorted(keys[i][pattern.visible[0, 0, i]].tolist()) for i in range(8)]
    # query 4 is in block 2, whose random block 1 holds tokens 2 and 3; token 3 is already in its window
    assert seen[4] == [0, 2, 3, 4, 5]
    assert seen[0] == [0, 1, 4, 5] and seen[1] == [0, 1, 2, 4, 5]  # token 0 counts once: window, not global
    # block 3's random block 3 (tokens 6, 7) wraps to 0, 1 in a sentence of 6; 0 is global already
    assert seen[6] == [0, 1, 5] and seen[7] == [0, 1]  # query 7 is padding: no window key is real


@pytest.mark.parametrize("block", [{"self_attention": "sparse", "window": 8, "global_tokens": 0, "random_blocks": 0},
                                   {"self_attention": "sparse", "window": 0, "global_tokens": 8, "random_blocks": 0},
                                   {"self_attention": "sparse", "window": 0, "global_tokens": 0, "random_blocks": 8,
                                    "block_size": 1}])
def test_sparse_attention_that_sees_every_key_is_full_attention(block):
    from helpers.models import TRANSFORMER

    src, mask, tgt = batch()
    full = make_tiny_model("transformer_post")
    sparse = build_model("s", {**TRANSFORMER, **block, "max_positions": 16}, Vocab.of(V, pad_id=PAD)).eval()
    if block["random_blocks"]:  # every random block a different token: 8 of them cover the 7 positions
        sparse.random_blocks.copy_(torch.arange(8).expand(16, 8))
    sparse.load_state_dict({**full.state_dict(), "random_blocks": sparse.random_blocks})
    assert torch.allclose(sparse(src, mask, tgt), full(src, mask, tgt), atol=1e-5)


@pytest.mark.parametrize("name", ["transformer_linformer", "transformer_sparse"])
def test_efficient_encoder_flops_grow_linearly_in_the_source_length(name):
    from nmtbench.models.flops import flop_counter

    model = make_tiny_model(name)
    counts = []
    for length in (4, 8, 12, 16):
        src = torch.randint(4, V, (1, length))
        with flop_counter() as counter:
            model.encode(src, src != PAD)
        counts.append(counter.get_total_flops())
    assert counts[3] - counts[2] == counts[2] - counts[1] == counts[1] - counts[0] > 0


def test_linformer_needs_the_source_within_max_positions():
    model = make_tiny_model("transformer_linformer")
    src = torch.randint(4, V, (1, 17))
    with pytest.raises(ValueError, match="sequence of 17 tokens exceeds max_positions 16 of the Linformer"):
        model.encode(src, src != PAD)


def test_a_hybrid_holds_its_halves_layers_as_their_families_name_them():
    """No layer of its own but the memory projection: every other weight of a hybrid is one its encoder's family
    or its decoder's family has under the same name and shape (so the halves are the families' code)."""
    vocabulary = {"embed.weight", "target_embed.weight", "output.weight"}
    for name in (f"hybrid_{encoder}_{decoder}" for encoder, decoder in PAIRS):
        hybrid = make_tiny_model(name)
        families = {}
        for side, named in (("encoder", ENCODERS), ("decoder", DECODERS)):
            block = HYBRIDS[name][side]
            families |= {key: value.shape for key, value in build_model(side, {**named[block["family"]]},
                                                                         Vocab.of(V, pad_id=PAD)).state_dict().items()}
        own = {key: value.shape for key, value in hybrid.state_dict().items()
               if key not in vocabulary and not key.startswith("memory_projection.")}
        assert {key: families.get(key) for key in own} == own, name
        projected = HYBRIDS[name]["encoder"]["family"] == "rnn" or HYBRIDS[name]["decoder"]["family"] == "rnn"
        assert isinstance(hybrid.memory_projection, torch.nn.Linear) == projected, name


def test_every_half_reads_embeddings_at_its_own_familys_scale():
    """A Transformer half reads its std width^-0.5 matrix times sqrt(width); the other half of a hybrid with one
    reads the same matrix at the same unit scale, the scale its own family's N(0, 1) embeddings have."""
    vocab = Vocab(source=4000, target=4000, joint=True, pad_id=PAD)
    tokens = torch.arange(4, 4000)[None]  # (1, 3996): every piece but the special ones
    for (encoder, decoder), pair in PAIRS.items():
        block = {"family": "hybrid", "encoder": ENCODERS[encoder],
                 "decoder": DECODERS[decoder], "tie_embeddings": "none"}
        torch.manual_seed(0)
        model = build_model("hybrid", block, vocab)
        for side, family in (("source", encoder), ("target", decoder)):
            read = getattr(model, f"embed_{side}")(tokens)
            scale = read.size(-1) ** 0.5 if family == "transformer" else 1.0  # its own half's factor
            assert abs(float((read * scale).std()) - 1.0) < 0.05, (pair.__name__, side)


def test_every_decoder_half_scores_at_its_own_familys_scale():
    """A unit decoder half (recurrent, convolutional) whose output layer is the target embedding, in a pair with a
    Transformer encoder, reads that scaled-drawn matrix at its unit scale: its scores over the same inputs spread as
    its own family's do. Read as drawn they were 16 times narrower, and the Transformer-encoder hybrid barely
    learned (docs/results/2026-11-26-hybrid-scale-cpu.md)."""
    vocab = Vocab(source=4000, target=4000, joint=True, pad_id=PAD)
    torch.manual_seed(0)
    x = torch.randn(64, 16)  # decoder outputs (B, 16): every tiny decoder half's output width
    for (encoder, decoder), pair in PAIRS.items():
        torch.manual_seed(0)
        hybrid = build_model("hybrid", {"family": "hybrid", "encoder": ENCODERS[encoder], "decoder": DECODERS[decoder]},
                             vocab)
        own = build_model(decoder, DECODERS[decoder], vocab)
        ratio = float(hybrid.logits(x).std() / own.logits(x).std())
        assert abs(ratio - 1.0) < 0.1, (pair.__name__, ratio)


def test_every_encoder_with_every_decoder_is_a_tested_variant():
    """The diagonal pairs are the families themselves; the others are hybrids, each in TINY_VARIANTS."""
    pairs = {(block["encoder"]["family"], block["decoder"]["family"]) for block in TINY_VARIANTS.values()
             if block["family"] == "hybrid"}
    assert pairs == {(encoder, decoder) for encoder in HALVES for decoder in HALVES if encoder != decoder} == set(PAIRS)
    assert set(HALVES) <= {block["family"] for block in TINY_VARIANTS.values()}
    halves = [block[side] for block in HYBRIDS.values() for side in ("encoder", "decoder")]
    assert {half.get("cell", "lstm") for half in halves if half["family"] == "rnn"} == {"rnn", "gru", "lstm"}
    assert {block["decoder"].get("attention") for block in HYBRIDS.values()
            if block["decoder"]["family"] == "rnn"} == {"dot", "general", "additive", "none"}
    assert {block["decoder"].get("init_hidden") for block in HYBRIDS.values()
            if block["decoder"]["family"] == "rnn"} == {None, "bridge"}
    assert {half.get("positions", "sinusoidal") for half in halves if half["family"] == "transformer"} == set(POSITIONS)


def test_the_shared_tests_cover_every_family_and_option():
    blocks = TINY_VARIANTS.values()
    assert {b["family"] for b in blocks} == {*FAMILIES, "bag_gru:BagGRU"}  # and the worked example of an own model
    for family in FAMILIES:  # every tying with one joint vocabulary or one per side, as far as each can apply
        ties = {(b.get("tie_embeddings") or ("target_output" if name in SEPARATE else "all"), name in SEPARATE)
                for name, b in TINY_VARIANTS.items() if b["family"] == family}
        assert {("all", False), ("none", True)} <= ties and "target_output" in {tie for tie, _ in ties}, family
    assert {b.get("tie_embeddings") for b in blocks} >= {"source_target", "target_output", "none"}  # all: unset
    assert any(b.get("attentional_dim") for b in blocks)
    assert {b.get("attention", "additive") for b in blocks if b["family"] == "rnn"} == set(rnn_config.ATTENTION_KINDS)
    assert {b.get("cell", "lstm") for b in blocks if b["family"] == "rnn"} == {"rnn", "gru", "lstm"}
    transformers = [b for b in blocks if b["family"] == "transformer"]
    assert {b.get("positions", "sinusoidal") for b in transformers} == set(POSITIONS)
    assert {b.get("norm", "post") for b in transformers} == set(NORMS)
    assert {b.get("self_attention", "full") for b in transformers} == set(SELF_ATTENTION)
    assert {b.get("linformer_sharing") for b in transformers} >= {"none", "layerwise"}
    assert any(b.get("decoder_window") for b in transformers)


def test_the_configs_choices_are_what_the_layers_build():
    """A config checks its choices without torch, by name; each name is one its family's layers build."""
    assert rnn_config.CELLS == tuple(rnn.CELL_LAYERS)
    assert rnn_config.ATTENTION_KINDS == ("none", *SCORERS)
    for config, layers in ((rnn_config, rnn), (transformer_config, transformer), (cnn_config, cnn)):
        assert config.INITS == tuple(layers.INITIALISATIONS), config.__name__


def test_every_models_checkpoint_names_and_shapes_are_those_it_always_had():
    """The family table builds every variant with the parameters it had before the table existed (recorded in
    fixtures/state_dict_keys.json), so every checkpoint trained then still loads."""
    recorded = json.loads((Path(__file__).parent / "fixtures" / "state_dict_keys.json").read_text())
    for name, keys in recorded.items():
        built = {key: list(value.shape) for key, value in make_tiny_model(name).state_dict().items()}
        assert built == keys, name


@pytest.mark.parametrize("name", [name for name, block in TINY_VARIANTS.items() if block["family"] == "hybrid"])
def test_a_hybrid_survives_pickling_and_copying(name):
    """A pair's class is made from the family table, not written in a module; pickle and deepcopy rebuild it."""
    model, src = make_tiny_model(name), torch.tensor([[5, 6, 7, 8], [9, 10, 0, 0]])
    for copied in (pickle.loads(pickle.dumps(model)), copy.deepcopy(model)):
        assert type(copied) is type(model) and type(copied).__name__ == type(model).__name__
        assert torch.equal(copied(src, src != PAD, src[:, :3]), model(src, src != PAD, src[:, :3]))


class BagConfig(ModelConfig):
    """A family for the test below: the mean of the embeddings, no order, no attention."""
    embed_dim: int = 16
    dropout: float = 0.0

    @property
    def embedding_width(self):
        return self.embed_dim


class BagEncoder(VocabularySeq2Seq):
    @staticmethod
    def memory_width(cfg):
        return cfg.embed_dim

    def build_encoder(self, cfg):
        self.bag = torch.nn.Linear(cfg.embed_dim, cfg.embed_dim)

    def encode(self, src, src_mask):
        return {"enc": self.bag(self.embed_source(src))}  # (B, S, E)


class BagDecoder(VocabularySeq2Seq):
    @staticmethod
    def attended_width(cfg):
        return cfg.embed_dim

    @staticmethod
    def output_width(cfg):
        return cfg.embed_dim

    def build_decoder(self, cfg):
        pass

    def init_state(self, memory, src_mask):
        mask = src_mask.unsqueeze(-1).float()
        return DecoderState({"source": (memory["enc"] * mask).sum(1, keepdim=True) / mask.sum(1, keepdim=True)})

    def teacher_forced(self, memory, src_mask, tgt_in):
        return self.output(self.embed_target(tgt_in) + self.init_state(memory, src_mask).tensors["source"])

    def decode_step(self, state, y_prev):
        x = self.embed_target(y_prev) + state.tensors["source"][:, 0]  # (B, E)
        return torch.log_softmax(self.output(x), dim=-1), DecoderState(state.tensors, state.step + 1)


class BagSeq2Seq(BagEncoder, BagDecoder):
    def __init__(self, cfg, vocab):
        super().__init__()
        self.cfg = cfg
        self.build_embeddings(vocab, cfg.embed_dim, cfg.tie_embeddings)
        self.build_encoder(cfg)
        self.build_decoder(cfg)
        self.build_output(vocab, cfg.embed_dim)


@pytest.fixture
def bag_family():
    """The bag family, one entry in the family table for the length of a test."""
    yield register(Family("bag", BagConfig, f"{__name__}:BagSeq2Seq", f"{__name__}:BagEncoder",
                          f"{__name__}:BagDecoder", encoder_keys=("embed_dim",), decoder_keys=("embed_dim",),
                          mechanism="convolution"))
    TABLE.pop("bag")


def test_a_new_family_is_one_entry_and_pairs_with_every_other_half(bag_family):
    """Registered, the family builds as a model, each of its halves pairs with every other family's, a pair's class
    is named after its halves, and the hybrids' tables (halves) and the verdict's mechanisms read it."""
    bag = {"family": "bag", "embed_dim": 16}
    src, vocab = torch.tensor([[5, 6, 7, 8], [9, 10, 0, 0]]), Vocab.of(V, pad_id=PAD)
    assert build_model("bag", bag, vocab)(src, src != PAD, src[:, :3]).shape == (2, 3, V)
    others = [family for family in with_halves() if family != "bag"]
    assert others == ["cnn", "rnn", "transformer"]
    for other in others:
        for encoder, decoder in ((bag, DECODERS[other]), (ENCODERS[other], bag)):
            block = {"family": "hybrid", "encoder": encoder, "decoder": decoder, "dropout": 0.0}
            model = build_model("pair", block, vocab).eval()
            assert model(src, src != PAD, src[:, :3]).shape == (2, 3, V)
            assert len(greedy(model, src, src != PAD, BOS, EOS, torch.tensor([4, 4]))) == 2
            assert halves(block)[0][0] == encoder["family"] and halves(block)[1][0] == decoder["family"]
            assert type(pickle.loads(pickle.dumps(model))) is type(model)
    named = {other: type(build_model("pair", {"family": "hybrid", "encoder": bag, "decoder": DECODERS[other]},
                                     vocab)).__name__ for other in others}
    assert named == {"cnn": "BagConv", "rnn": "BagRecurrent", "transformer": "BagTransformer"}
    with pytest.raises(ConfigError, match="choose one of bag, cnn, decoder_only, hybrid, rnn, transformer"):
        build_model("bad", {"family": "sack"}, vocab)
