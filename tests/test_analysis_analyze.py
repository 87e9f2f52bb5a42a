"""The analyze stage refuses what it cannot run before doing any work, and writes nothing then."""

import pytest
import torch

from nmtbench.analysis.analyze import analyze
from nmtbench.config import ConfigError, DataConfig, TokenizeConfig, load_params
from nmtbench.data.prepare import prepare
from nmtbench.data.tokenizer import tokenize


def test_params_without_an_analyze_block_are_refused(tmp_path):
    params = load_params("params.yaml").model_copy(update={"analyze": None})
    with pytest.raises(ConfigError, match="params.yaml has no analyze block"):
        analyze(params, tmp_path / "tokenized", tmp_path / "results")
    assert not (tmp_path / "results").exists()


def test_missing_tokenized_data_names_the_stage_to_run(tmp_path):
    with pytest.raises(FileNotFoundError, match="run the tokenize stage first"):
        analyze(load_params("params.yaml"), tmp_path / "tokenized", tmp_path / "results")
    assert not (tmp_path / "results").exists()


def test_a_bad_model_block_is_refused_with_its_name(tmp_path):
    params = load_params("params.yaml")
    models = {**params.analyze.models, "rnn": {**params.analyze.models["rnn"], "cell": "tanh"}}
    params = params.model_copy(update={"analyze": params.analyze.model_copy(update={"models": models})})
    with pytest.raises(ConfigError, match="models.rnn.cell: 'tanh' is not valid"):
        analyze(params, tmp_path / "tokenized", tmp_path / "results")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without a GPU")
def test_cuda_without_a_gpu_is_refused(tmp_path):
    params = load_params("params.yaml")
    params = params.model_copy(update={"analyze": params.analyze.model_copy(update={"device": "cuda"})})
    with pytest.raises(ConfigError, match="set analyze.device: cpu"):
        analyze(params, tmp_path / "tokenized", tmp_path / "results")


def test_a_tying_the_vocabularies_cannot_take_is_refused_before_any_work(make_data_mirror, tmp_path, monkeypatch):
    """The gradient probe trains on data/tokenized: with one vocabulary per side no probed model may make the
    source and the target embedding one matrix."""
    mirror, checksums = make_data_mirror()
    prepare(DataConfig(max_length=8), mirror, tmp_path / "prepared", tmp_path / "stats.json", tmp_path / "raw",
            checksums)
    tokenize(TokenizeConfig(joint=False, vocab_size=290, target_vocab_size=300), tmp_path / "prepared",
             tmp_path / "tokenized")
    params = load_params("params.yaml")
    name = params.analyze.gradient_models[0]
    models = {**params.analyze.models, name: {**params.analyze.models[name], "tie_embeddings": "all"}}
    params = params.model_copy(update={"analyze": params.analyze.model_copy(update={"models": models})})
    monkeypatch.setattr("nmtbench.analysis.analyze.sweep", lambda cfg: pytest.fail("measured before refusing"))
    with pytest.raises(ConfigError, match=f"^models.{name}.tie_embeddings: all makes the source and the target "
                                          "embedding one matrix, which needs one joint vocabulary"):
        analyze(params, tmp_path / "tokenized", tmp_path / "results")
    assert not (tmp_path / "results").exists()
