"""Each dropout site of a model block drops where it is set and nowhere else (models/*.py, `<site>_dropout`)."""
import pytest
import torch

from nmtbench.models import attention, cnn, dropout, efficient_attention, rnn
from nmtbench.models.registry import build_model
from nmtbench.models.vocabulary import Vocab
from nmtbench.param_blocks import ConfigError

B, S, T = 2, 5, 4
TRANSFORMER = {"family": "transformer", "d_model": 8, "heads": 2, "layers": 1, "d_ff": 12}
RNN = {"family": "rnn", "cell": "gru", "embed_dim": 6, "hidden_dim": 8, "attention": "additive",
       "init_hidden": "bridge"}
CNN = {"family": "cnn", "embed_dim": 6, "channels": 8, "encoder_layers": 2, "decoder_layers": 2}


@pytest.fixture
def drops(monkeypatch):
    """The shape of every tensor dropped at a rate above 0 in a training forward pass."""
    seen = []

    def record(x, p, training=True):
        if training and p:
            seen.append(tuple(x.shape))
        return x

    for module in (dropout, attention, efficient_attention, rnn, cnn):
        monkeypatch.setattr(module, "dropout", record)
    return seen


def forward(block: dict) -> None:
    torch.manual_seed(0)
    model = build_model("m", block, Vocab.of(30)).train()
    src, tgt = torch.randint(4, 30, (B, S)), torch.randint(4, 30, (B, T))
    model(src, torch.ones(B, S, dtype=torch.bool), tgt)


def sites(block: dict, **rates) -> dict:
    """block with every rate 0 but those given."""
    zero = {key: 0.0 for key in ("dropout", *(f"{site}_dropout" for site in SITES[block["family"]]))}
    return {**block, **zero, **rates}


SITES = {"transformer": ("attention", "activation"),
         "rnn": ("source_embedding", "target_embedding", "layer", "context", "output"),
         "cnn": ("embedding", "convolution", "output")}


@pytest.mark.parametrize("rates, shapes", [
    # the attention weights (B, heads, queries, keys): the encoder's, the decoder's own and its look at the source
    ({"attention_dropout": 0.5}, [(B, 2, S, S), (B, 2, T, T), (B, 2, T, S)]),
    ({"activation_dropout": 0.5}, [(B, S, 12), (B, T, 12)]),  # the feed-forward's hidden layer, d_ff wide
    # the embeddings and each residual branch: two sublayers in the encoder layer, three in the decoder's
    ({"dropout": 0.5, "attention_dropout": 0.0, "activation_dropout": 0.0},
     [(B, S, 8)] * 3 + [(B, T, 8)] * 4),
])
def test_each_transformer_site_drops_there_alone(drops, rates, shapes):
    forward(sites(TRANSFORMER, **rates))
    assert sorted(drops) == sorted(shapes)


def test_unset_transformer_sites_drop_at_the_models_rate(drops):
    forward({**TRANSFORMER, "dropout": 0.3})  # as every run before the sites existed: all three at dropout
    assert sorted(drops) == sorted([(B, 2, S, S), (B, 2, T, T), (B, 2, T, S), (B, S, 12), (B, T, 12)]
                                   + [(B, S, 8)] * 3 + [(B, T, 8)] * 4)


@pytest.mark.parametrize("rates, shapes", [
    ({"source_embedding_dropout": 0.5}, [(B, S, 6)]),
    ({"target_embedding_dropout": 0.5}, [(B, T, 6)]),
    ({"context_dropout": 0.5}, [(B, S, 8)]),  # the encoder states, both directions side by side
    ({"output_dropout": 0.5}, [(B, T, 6)]),  # a_t before the output layer
])
def test_each_recurrent_site_drops_there_alone(drops, rates, shapes):
    forward(sites(RNN, **rates))
    assert drops == shapes


def test_unset_recurrent_sites_drop_at_the_models_rate_and_the_context_not_at_all(drops):
    forward({**RNN, "dropout": 0.3})
    assert drops == [(B, S, 6), (B, T, 6), (B, T, 6)]  # source and target embeddings, a_t


def test_the_recurrent_layer_site_is_torchs_dropout_between_stacked_layers():
    model = build_model("m", {**RNN, "layers": 2, "dropout": 0.3, "layer_dropout": 0.1}, Vocab.of(30))
    assert (model.encoder.dropout, model.decoder.dropout) == (0.1, 0.1)
    one = build_model("m", {**RNN, "layers": 1, "layer_dropout": 0.1}, Vocab.of(30))
    assert (one.encoder.dropout, one.decoder.dropout) == (0.0, 0.0)  # nothing between one layer


@pytest.mark.parametrize("rates, shapes", [
    ({"embedding_dropout": 0.5}, [(B, S, 6), (B, T, 6)]),
    ({"convolution_dropout": 0.5}, [(B, 8, S)] * 2 + [(B, 8, T)] * 2),  # each convolution's input, channels first
    ({"output_dropout": 0.5}, [(B, T, 6)]),
])
def test_each_convolutional_site_drops_there_alone(drops, rates, shapes):
    forward(sites(CNN, **rates))
    assert drops == shapes


def test_a_hybrid_half_takes_its_own_sites_and_the_models_rate_elsewhere(drops):
    encoder = {k: v for k, v in TRANSFORMER.items() if k != "family"}
    forward({"family": "hybrid", "dropout": 0.0, "encoder": {"family": "transformer", **encoder,
                                                             "attention_dropout": 0.5},
             "decoder": {"family": "rnn", "cell": "gru", "embed_dim": 8, "hidden_dim": 8, "attention": "dot"}})
    assert drops == [(B, 2, S, S)]


@pytest.mark.parametrize("block, message", [
    ({**TRANSFORMER, "attention_dropout": 1.0}, "models.m.attention_dropout: must be in [0, 1), got 1.0"),
    ({**RNN, "context_dropout": -0.1}, "models.m.context_dropout: must be in [0, 1), got -0.1"),
    ({**CNN, "output_dropout": 1.5}, "models.m.output_dropout: must be in [0, 1), got 1.5"),
    ({**RNN, "attention_dropout": 0.1}, "attention_dropout"),  # not a site of this family: refused as an unknown key
])
def test_a_rate_outside_zero_to_one_or_a_site_the_family_lacks_is_refused(block, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        build_model("m", block, Vocab.of(30))
