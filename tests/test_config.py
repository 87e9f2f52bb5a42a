import pytest
import yaml

from nmtbench.config import ConfigError, load_params, merge, parse_params, run_dir


def raw():
    with open("params.yaml") as f:
        return yaml.safe_load(f)


def test_default_params_load():
    params = load_params("params.yaml")
    assert params.data.pair == "en-de"
    assert set(params.models) >= {"lstm_attention_additive", "transformer", "decoder_only", "cnn"}


@pytest.mark.parametrize("override, message", [
    ({"data": {"src_lang": "xx"}}, "data.src_lang: 'xx' is not valid; choose one of en, de, fr, cs"),
    ({"data": {"tgt_lang": "en"}}, "data.tgt_lang: 'en' is not valid; choose one of de, fr, cs"),
    ({"data": {"src_lang": "cs"}}, "test_2017_flickr has no Czech"),
    ({"train": {"lr": -1}}, "train.lr: must be > 0"),
    ({"train": {"max_time": "20 minutes"}}, "train.max_time: expected DD:HH:MM:SS"),
    ({"train": {"batch_size": 3}}, "train: unknown key(s) batch_size"),
    ({"wandb": {"mode": "cloud"}}, "wandb.mode: 'cloud' is not valid"),
    ({"trian": {}}, "params: unknown block(s) trian"),
    ({"train": {"seed": 1}}, "train.seed: replaced by the top-level list `seeds` (e.g. seeds: [42]); move it there"),
    ({"seeds": []}, "seeds: expected a list of distinct integers, e.g. [42] or [1, 2, 3], got []"),
    ({"seeds": [1, 1]}, "seeds: expected a list of distinct integers"),
    ({"seeds": 42}, "seeds: expected a list of distinct integers"),
    ({"seeds": [1, 2]}, "beam_sweep.seed: 42 is not in seeds [1, 2]; choose one of them"),
    ({"compare": {"baseline": "gpt"}}, "compare.baseline: 'gpt' is not a model of params.yaml; choose one of rnn, gru"),
    ({"compare": {"bootstrap_seed": 0}}, "compare.bootstrap_seed: must be > 0, got 0"),
    ({"compare": {"bootstrap_resamples": 0}}, "compare.bootstrap_resamples: must be > 0, got 0"),
    ({"compare": {"length_buckets": [12, 8]}}, "compare.length_buckets: expected increasing positive integers"),
    ({"compare": {"length_buckets": []}}, "compare.length_buckets: expected increasing positive integers"),
    ({"compare": {"examples": [-1]}}, "compare.examples: expected sentence indices (integers >= 0), got [-1]"),
])
def test_bad_params_name_the_key_and_the_fix(override, message):
    with pytest.raises(ConfigError) as error:
        parse_params(merge(raw(), override))
    assert message in str(error.value)


def test_seeds_make_the_grid_and_each_run_its_folder():
    params = parse_params(merge(raw(), {"seeds": [1, 2, 3], "beam_sweep": {"seed": 2}}))
    assert params.seeds == [1, 2, 3] and params.beam_sweep.seed == 2
    assert run_dir("transformer", 2).as_posix() == "transformer/seed2"
    assert load_params("params.yaml").seeds == [42]


def test_unknown_model_lists_the_defined_ones():
    with pytest.raises(ConfigError, match="unknown model 'gpt'; params.yaml defines: rnn, gru, lstm, "):
        load_params("params.yaml").model_block("gpt")


def test_merge_is_deep_and_leaves_its_inputs_alone():
    base = {"a": {"b": 1, "c": 2}, "d": [1]}
    assert merge(base, {"a": {"c": 3}, "d": [2]}) == {"a": {"b": 1, "c": 3}, "d": [2]}
    assert base == {"a": {"b": 1, "c": 2}, "d": [1]}


def test_missing_params_file_says_where_to_run(tmp_path):
    with pytest.raises(ConfigError, match="no such params file"):
        load_params(tmp_path / "params.yaml")
