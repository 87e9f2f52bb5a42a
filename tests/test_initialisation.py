"""How each family draws its weights (a model block's `init`): PyTorch's draw unchanged by default, and the weight
statistics of fairseq's and nmtpytorch's schemes."""
import hashlib
import math

import pytest
import torch

from nmtbench.models.registry import build_model
from nmtbench.models.vocabulary import Vocab
from nmtbench.param_blocks import ConfigError

TRANSFORMER = {"family": "transformer", "d_model": 64, "heads": 4, "layers": 2, "d_ff": 256, "tie_embeddings": "all"}
RNN = {"family": "rnn", "cell": "gru", "embed_dim": 64, "hidden_dim": 128, "attention": "additive",
       "init_hidden": "bridge", "tie_embeddings": "none"}
CNN = {"family": "cnn", "embed_dim": 64, "channels": 96, "dropout": 0.2, "kernel": 3}


def build(block: dict, seed: int = 0, vocab: int = 500):
    torch.manual_seed(seed)
    return build_model("m", block, Vocab.of(vocab))


def digest(model) -> str:
    h = hashlib.sha256()
    for key, value in model.state_dict().items():
        h.update(key.encode())
        h.update(value.detach().float().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


# the weights every run trained before `init` existed drew at seed 0 (recorded before the option was added): the
# default must keep drawing exactly these, or committed runs could not be told apart from what a rerun gives
BEFORE = {"transformer": ({**TRANSFORMER, "layers": 1}, "8edf80b3da1b4fc9"),
          "rnn": (RNN, "a8f69c162cbd8a88"),
          "cnn": (CNN, "7d050a28261a67f2")}


@pytest.mark.parametrize("family", sorted(BEFORE))
def test_the_default_draws_the_weights_runs_drew_before_init_existed(family):
    block, before = BEFORE[family]
    assert digest(build(block)) == before
    assert digest(build({**block, "init": "pytorch"})) == before


def uniform_bound(weight, gain=1.0) -> float:
    fan_out, fan_in = weight.shape[:2]
    return gain * math.sqrt(6 / (fan_in + fan_out))


def test_fairseqs_transformer_draw_is_xavier_with_its_gains_and_zero_biases():
    model = build({**TRANSFORMER, "init": "fairseq"})
    attention, ff = model.encoder_layers[0].self_attn, model.encoder_layers[0].ff
    for projection, gain in ((attention.q, 2 ** -0.5), (attention.k, 2 ** -0.5), (attention.v, 2 ** -0.5),
                             (attention.o, 1.0), (ff[0], 1.0), (ff[3], 1.0)):
        bound = uniform_bound(projection.weight, gain)
        assert projection.weight.abs().max() <= bound
        assert projection.weight.std().item() == pytest.approx(bound / math.sqrt(3), rel=0.05)
    assert attention.o.bias.abs().max() == 0 and ff[0].bias.abs().max() == 0 and ff[3].bias.abs().max() == 0
    assert attention.q.bias.abs().max() > 0  # fairseq leaves the input projections' biases as PyTorch drew them
    embedding = model.embed.weight
    assert embedding[model.pad_id].abs().max() == 0
    assert embedding[1:].std().item() == pytest.approx(64 ** -0.5, rel=0.05)
    assert model.output.weight is embedding  # tied: the same matrix, drawn once
    norm = model.encoder_layers[0].sub_self.norm
    assert torch.equal(norm.weight, torch.ones(64)) and torch.equal(norm.bias, torch.zeros(64))


def test_fairseqs_draw_serves_the_decoder_only_model_and_learned_positions():
    block = {"family": "decoder_only", "d_model": 64, "heads": 4, "layers": 2, "d_ff": 256, "positions": "learned",
             "init": "fairseq"}
    model = build(block)
    q = model.layers[0].self_attn.q.weight
    assert q.std().item() == pytest.approx(uniform_bound(q, 2 ** -0.5) / math.sqrt(3), rel=0.05)
    assert model.position_table.weight.std().item() == pytest.approx(64 ** -0.5, rel=0.05)


def test_nmtpytorchs_recurrent_draw_is_kaiming_normal_with_zero_feed_forward_biases():
    model = build({**RNN, "init": "nmtpytorch"})
    for weight in (model.encoder.weight_ih_l0, model.decoder.weight_hh_l0, model.embed.weight,
                   model.target_embed.weight, model.pre_output.weight, model.bridge.weight, model.output.weight):
        assert weight.std().item() == pytest.approx(math.sqrt(2 / weight.size(1)), rel=0.05)
    assert model.pre_output.bias.abs().max() == 0 and model.bridge.bias.abs().max() == 0
    gru_bias = model.encoder.bias_ih_l0  # the RNN's biases stay as PyTorch drew them: U(-1/sqrt(H), 1/sqrt(H))
    assert 0 < gru_bias.abs().max() <= 64 ** -0.5


def test_fairseqs_convolutional_draw_keeps_the_variance_through_its_dropout_sites():
    model = build({**CNN, "init": "fairseq"})
    assert model.embed.weight[1:].std().item() == pytest.approx(0.1, rel=0.05)
    assert model.embed.weight[model.pad_id].abs().max() == 0
    assert model.src_positions.weight.std().item() == pytest.approx(0.1, rel=0.05)
    conv = model.enc_convs[0]
    assert conv.weight.std().item() == pytest.approx(math.sqrt(4 * 0.8 / (3 * 96)), rel=0.05)
    assert model.enc_in.weight.std().item() == pytest.approx(math.sqrt(0.8 / 64), rel=0.05)  # fed by a dropout site
    assert model.att_in[0].weight.std().item() == pytest.approx(math.sqrt(1 / 96), rel=0.05)  # fed by none
    assert all(layer.bias.abs().max() == 0 for layer in (conv, model.enc_in, model.att_in[0], model.dec_out))


@pytest.mark.parametrize("block, message", [
    ({**TRANSFORMER, "init": "nmtpytorch"}, "models.m.init: 'nmtpytorch'"),
    ({**RNN, "init": "fairseq"}, "models.m.init: 'fairseq'"),
    ({"family": "hybrid", "init": "fairseq", "encoder": {"family": "transformer"}, "decoder": {"family": "rnn"}},
     "models.m.init: fairseq is a family's own draw"),
])
def test_an_initialisation_the_family_lacks_is_refused_naming_the_choices(block, message):
    with pytest.raises(ConfigError) as error:
        build(block)
    assert str(error.value).startswith(message)
