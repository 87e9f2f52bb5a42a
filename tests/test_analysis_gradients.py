"""Gradient probe: shape, causality, the curve by distance and the span."""
import pytest
import torch
import torch.nn.functional as F

from helpers.models import TINY_VARIANTS, make_tiny_model
from nmtbench.analysis.gradients import by_distance, gradient_map, probe, span
from nmtbench.config import ANALYZE_ROLES, AnalyzeConfig, DataConfig, TokenizeConfig
from nmtbench.data.prepare import prepare
from nmtbench.data.tokenizer import tokenize


def probe_inputs(T=6, S=5):
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(4, 20, (3, S), generator=generator)
    tgt = torch.randint(4, 20, (3, T), generator=generator)
    return src, src != 0, tgt, torch.roll(tgt, -1, dims=1)


@pytest.mark.parametrize("name", ["rnn_none", "gru_none", "lstm_none", "lstm_additive", "transformer_post",
                                  "transformer_relative", "decoder_only", "cnn",
                                  # a target embedding of its own (one vocabulary per side, or untied)
                                  "gru_additive_untied", "transformer_untied", "decoder_only_separate", "cnn_untied"])
def test_gradient_map_is_square_causal_and_nonzero_on_the_diagonal(name):
    gradients = gradient_map(make_tiny_model(name), *probe_inputs())
    assert gradients.shape == (6, 6)
    assert torch.all(gradients.triu(1) == 0)  # the loss at t never depends on an input after t
    assert torch.all(gradients.diagonal() > 0)


def test_recurrent_models_reach_back_to_the_first_step_and_a_convolution_does_not():
    assert gradient_map(make_tiny_model("rnn_none"), *probe_inputs())[-1, 0] > 0
    assert TINY_VARIANTS["cnn_wide_kernel"]["kernel"] == 5  # one decoder layer: 4 steps back
    gradients = gradient_map(make_tiny_model("cnn_wide_kernel"), *probe_inputs())
    assert gradients[5, 1] > 0 and gradients[5, 0] == 0


def test_by_distance_averages_each_diagonal():
    gradients = torch.tensor([[4.0, 0.0, 0.0], [2.0, 6.0, 0.0], [1.0, 3.0, 8.0]])
    assert by_distance(gradients) == [6.0, 2.5, 1.0]


def test_span_is_the_first_distance_below_the_threshold():
    assert span([1.0, 0.5, 0.009, 0.02], threshold=0.01) == 2
    assert span([1.0, 0.5, 0.2], threshold=0.01) is None


class LookUp(torch.nn.Module):
    """The embedding's own lookup as a plain function, so no nn.Embedding reads the target tokens."""

    def __init__(self, embedding: torch.nn.Embedding):
        super().__init__()
        self.weight, self.padding_idx = embedding.weight, embedding.padding_idx

    def forward(self, ids):
        return F.embedding(ids, self.weight, self.padding_idx)


def test_a_model_without_a_target_embedding_is_refused():
    model = make_tiny_model("rnn_none")
    inputs = probe_inputs()
    expected = model(*inputs[:3])
    model.embed = LookUp(model.embed)
    assert torch.equal(model(*inputs[:3]), expected)  # the same model, its tokens embedded some other way
    message = ("RNNSeq2Seq: expected one nn.Embedding reading the target tokens, found 0; "
               "the gradient probe needs the target embedding as a tensor of its own")
    with pytest.raises(ValueError) as refused:
        gradient_map(model, *inputs)
    assert str(refused.value) == message


def test_the_probe_trains_on_one_vocabulary_per_side(make_data_mirror, tmp_path):
    """The models are built for data/tokenized's vocabularies: here a source of 290 and a target of 300 pieces,
    with the target embedding tied to the output layer (tie_embeddings unset)."""
    mirror, checksums = make_data_mirror()
    prepare(DataConfig(max_length=8), mirror, tmp_path / "prepared", tmp_path / "stats.json", tmp_path / "raw",
            checksums)
    tokenize(TokenizeConfig(joint=False, vocab_size=290, target_vocab_size=300), tmp_path / "prepared",
             tmp_path / "tokenized")
    model = {"family": "transformer", "d_model": 8, "heads": 2, "layers": 1, "d_ff": 16}
    cfg = AnalyzeConfig(models={"t": model}, roles=dict.fromkeys(ANALYZE_ROLES, "t"), gradient_models=["t"],
                        synthetic_models=["t"], probe_rows=1, probe_length=6, probe_steps=2, batch_tokens=64)
    runs = probe(cfg, tmp_path / "tokenized")["t"]
    assert list(runs) == ["init", "clipped", "unclipped"]
    assert [len(run["curve"]) for run in runs.values()] == [6, 6, 6]
    assert [len(runs[run]["losses"]) for run in ("clipped", "unclipped")] == [2, 2]
