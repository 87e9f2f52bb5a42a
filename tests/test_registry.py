"""Building models from params blocks: the built-in families and a researcher's own class named by import path."""
import textwrap

import pytest
import torch

from helpers.models import PAD, V
from nmtbench.config import BudgetConfig, ConfigError
from nmtbench.models.registry import build_model, model_config
from nmtbench.models.vocabulary import Vocab
from nmtbench.training.budget import budget_limits

OWN = textwrap.dedent('''
    import torch
    from torch import nn
    from bag_gru import BagGRU, BagGRUConfig
    from nmtbench.config import Block
    from nmtbench.models.interface import Seq2Seq


    class WideConfig(BagGRUConfig):
        hidden_dim: int = 24


    class Wide(BagGRU):
        config_class = WideConfig


    class NotAModel:
        config_class = WideConfig


    class NoConfig(BagGRU):
        config_class = dict


    class LookupConfig(Block):
        pass


    class Lookup(Seq2Seq):
        """Logits looked up from the previous token: no matrix product for the FLOP counter to see."""
        config_class = LookupConfig

        def __init__(self, cfg, vocab):
            super().__init__()
            self.table, self.pad_id = nn.Embedding(vocab.target, vocab.target), vocab.pad_id

        def encode(self, src, src_mask):
            return None

        def teacher_forced(self, memory, src_mask, tgt_in):
            return self.table(tgt_in)
''')


@pytest.fixture
def own_module(tmp_path, monkeypatch):
    (tmp_path / "own_models.py").write_text(OWN)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "own_models"


def test_an_own_class_is_built_with_its_config_validated_like_a_builtin(own_module):
    cfg = model_config("wide", {"family": "own_models:Wide", "embed_dim": 8})
    assert (type(cfg).__name__, cfg.embed_dim, cfg.hidden_dim) == ("WideConfig", 8, 24)
    model = build_model("wide", {"family": "own_models:Wide", "embed_dim": 8}, Vocab.of(V, pad_id=PAD))
    assert model.cell.hidden_size == 24 and model.num_parameters() == sum(p.numel() for p in model.parameters())
    with pytest.raises(ConfigError, match=r"models.wide: unknown key\(s\) heads"):
        model_config("wide", {"family": "own_models:Wide", "heads": 4})
    with pytest.raises(ConfigError, match=r"models.wide.dropout: must be in \[0, 1\), got 1.5"):
        model_config("wide", {"family": "own_models:Wide", "dropout": 1.5})  # its own validate() runs too


@pytest.mark.parametrize("family, error", [
    ("no_such_module:Model", "models.m.family: cannot import no_such_module (No module named 'no_such_module'); put "
                             "its folder on PYTHONPATH or install it, or choose one of cnn, decoder_only, hybrid"),
    ("own_models:Missing", "models.m.family: Missing in own_models is not found; name a Seq2Seq subclass"),
    ("own_models:NotAModel", "NotAModel in own_models is not a subclass of nmtbench.models.interface.Seq2Seq"),
    ("own_models:NoConfig", "models.m.family: own_models:NoConfig declares no config class; set its class attribute "
                            "config_class to a subclass of nmtbench.config.Block"),
    ("lstm", "models.m.family: 'lstm' is not valid; choose one of cnn, decoder_only, hybrid, rnn, transformer"),
])
def test_a_bad_family_is_refused_in_one_line(own_module, family, error):
    with pytest.raises(ConfigError) as refused:
        model_config("m", {"family": family})
    assert error in str(refused.value) and "\n" not in str(refused.value)


def test_a_model_whose_flops_torch_cannot_count_needs_another_budget(own_module):
    model = build_model("lookup", {"family": "own_models:Lookup"}, Vocab.of(V, pad_id=PAD))
    with pytest.raises(ConfigError, match="finds no matrix product in the training step of Lookup, so a flops budget "
                                          "would never stop it; give it train.budget.kind time or train.max_steps"):
        budget_limits(BudgetConfig(kind="flops", value=1e9), model)
    max_time, counter = budget_limits(BudgetConfig(kind="none"), model)  # counted as 0, stopped by epochs
    assert max_time is None and counter.limit is None and counter.cost(2, 3, 4) == 0
    assert torch.equal(model(torch.ones(1, 2, dtype=torch.long), None, torch.ones(1, 3, dtype=torch.long)),
                       model.table(torch.ones(1, 3, dtype=torch.long)))
