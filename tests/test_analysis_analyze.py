"""The analyze stage refuses what it cannot run before doing any work, and writes nothing then."""

import pytest
import torch

from nmtbench.analysis.analyze import analyze
from nmtbench.config import ConfigError, load_params


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
