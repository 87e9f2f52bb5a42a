"""Matched widths: `d` multiples become sizes, everything else is kept."""
import pytest

from nmtbench.analysis.sizing import at_width, build_at_width
from nmtbench.config import ConfigError
from nmtbench.models.vocabulary import Vocab


def test_multiples_of_d_become_sizes_and_other_values_stay():
    block = {"family": "transformer", "d_model": "d", "d_ff": "4d", "heads": 2, "positions": "learned"}
    assert at_width("t", block, 16) == {"family": "transformer", "d_model": 16, "d_ff": 64, "heads": 2,
                                         "positions": "learned"}


def test_the_built_model_has_the_width():
    model = build_at_width("r", {"family": "rnn", "cell": "gru", "embed_dim": "d", "hidden_dim": "2d"}, 8, Vocab.of(20))
    assert model.embed.embedding_dim == 8 and model.decoder.hidden_size == 16


def test_a_hybrids_halves_are_sized_too():
    block = {"family": "hybrid", "encoder": {"family": "transformer", "d_model": "d", "d_ff": "4d", "heads": 2},
             "decoder": {"family": "rnn", "embed_dim": "d", "hidden_dim": "2d", "attention": "general"}}
    model = build_at_width("h", block, 8, Vocab.of(20))
    assert model.encoder_layers[0].ff[0].out_features == 32 and model.decoder.hidden_size == 16
    assert model.memory_projection.in_features == 8


def test_a_block_that_is_not_a_mapping_is_refused():
    with pytest.raises(ConfigError, match="analyze.models.x"):
        at_width("x", "d", 8)
