import pytest
import yaml

from nmtbench.config import AnalyzeConfig, ConfigError, Params, load_params, parse_params
from nmtbench.models.registry import build_model, model_config
from nmtbench.models.vocabulary import Vocab
from nmtbench.profiles import apply_profile, merge


def raw():
    with open("params.yaml") as f:
        return yaml.safe_load(f)


def test_default_params_load():
    params = load_params("params.yaml")
    assert params.data.pair == "en-de"
    assert set(params.models) >= {"lstm_attention_additive", "transformer", "decoder_only", "cnn"}


# params.yaml's values that the schema cannot have as defaults, and why
NOT_SCHEMA_DEFAULTS = {
    "data.source.path": "a multi30k source has no corpus folder; DVC's prepare stage depends on .dvcignore instead",
    "beam_sweep.model": "a model of this grid", "compare.baseline": "a model of this grid",
}


def differences(written, schema, path=""):
    """The dotted keys whose value in written differs from schema's."""
    if isinstance(written, dict) and isinstance(schema, dict):
        return [found for key in written.keys() | schema.keys()
                for found in differences(written.get(key), schema.get(key), f"{path}.{key}".lstrip("."))]
    return [] if written == schema else [path]


def test_params_yaml_writes_the_schemas_defaults():
    """One source of defaults: a key left out of params.yaml means what params.yaml says it is."""
    params = load_params("params.yaml")
    schema = Params(models=raw()["models"]).model_dump()
    written = params.model_dump()
    # the analyze block's probe models are this project's, and its roles name them: the rest has the schema's values
    probes = params.analyze.model_dump(include={"models", "roles", "gradient_models", "synthetic_models"})
    schema["analyze"] = AnalyzeConfig(**probes).model_dump()
    assert sorted(differences(written, schema)) == sorted(NOT_SCHEMA_DEFAULTS)


@pytest.mark.parametrize("override, message", [
    ({"data": {"src_lang": "xx"}}, "data.src_lang: 'xx' is not valid; choose one of en, de, fr, cs"),
    ({"data": {"tgt_lang": "en"}}, "data.tgt_lang: 'en' is not valid; choose one of de, fr, cs"),
    ({"data": {"src_lang": "cs"}},
     "data.eval_splits: Multi30k's test_2017_flickr has no 'cs'; remove it from eval_splits"),
    ({"data": {"eval_splits": ["newstest2014"]}}, "data.eval_splits: 'newstest2014' is not valid; choose one of val, "
                                                  "test_2016_flickr, test_2017_flickr"),
    ({"data": {"source": {"kind": "ftp"}}}, "data.source.kind: 'ftp' is not valid; choose one of multi30k, files, hub"),
    ({"tokenize": {"target_vocab_size": 6000}}, "tokenize.target_vocab_size: only read when tokenize.joint is false "
                                                "(one sentencepiece model per side); remove it or set joint: false"),
    ({"tokenize": {"joint": "no"}}, "tokenize.joint: expected bool, got 'no'"),
    ({"data": {"source": {"kind": "files", "path": None}}}, "data.source.path: kind files needs the corpus folder"),
    ({"data": {"source": {"kind": "hub"}}}, "data.source.name: kind hub needs a dataset id, e.g. name: wmt/wmt14"),
    ({"data": {"source": {"kind": "hub", "name": "x", "splits": {"val": 1}}}},
     "data.source.splits: expected our split name -> the dataset's split name, got 'val': 1"),
    ({"data": {"source": {"url": "x"}}}, "data.source: unknown key(s) url"),
    ({"data": {"source": {"kind": "files", "path": "c"}, "src_lang": "xx", "tgt_lang": "xx"}},
     "data.tgt_lang: 'xx' is also data.src_lang; choose another language"),
    ({"data": {"source": {"kind": "files", "path": "c"}, "eval_splits": []}},
     "data.eval_splits: empty; list at least one test set to evaluate, e.g. [test_2016_flickr]"),
    ({"data": {"source": {"kind": "files", "path": "c"}, "eval_splits": ["train"]}}, "data.eval_splits: expected"),
    ({"beam_sweep": {"split": "test_2018_flickr"}}, "beam_sweep.split: 'test_2018_flickr' is not valid; choose one "
                                                    "of val, test_2016_flickr, test_2017_flickr"),
    ({"report": {"attention_split": "train"}}, "report.attention_split: 'train' is not valid; choose one of val, "),
    ({"compare": {"external": {"cnn": {"test_2016_flickr": "systems/a", "test_2017_flickr": "systems/b"}}}},
     "compare.external.cnn: 'cnn' is also a model of params.yaml; give the outside system another name"),
    ({"compare": {"external": {"peer": {"test_2016_flickr": "systems/a"}}}},
     "compare.external.peer: gives test_2016_flickr; it needs one hypothesis file per test set the models are "
     "scored on, in order: test_2016_flickr, test_2017_flickr (data.eval_splits)"),
    ({"compare": {"external": {"peer": {"test_2016_flickr": "systems/a", "test_2017_flickr": "../b"}}}},
     "compare.external.peer.test_2017_flickr: ../b is not under systems/, the folder the compare stage depends on"),
    ({"compare": {"external": {"peer": "systems/a"}}}, "compare.external: expected system name -> {test split"),
    ({"train": {"lr": -1}}, "train.lr: must be > 0"),
    ({"train": {"budget": {"kind": "joules", "value": 1}}}, "train.budget.kind: 'joules' is not valid"),
    ({"train": {"budget": {"kind": "flops", "value": None}}}, "train.budget.value: budget kind flops needs a value"),
    ({"train": {"budget": {"kind": "flops", "value": "2.0e15"}}}, "train.budget.value: expected float or null"),
    ({"train": {"budget": {"kind": "time", "value": -5}}}, "train.budget.value: must be > 0"),
    ({"train": {"average_last": -1}}, "train.average_last: must be >= 0"),
    ({"train": {"batch_size": 3}}, "train: unknown key(s) batch_size"),
    ({"wandb": {"mode": "cloud"}}, "wandb.mode: 'cloud' is not valid"),
    ({"train": {"early_stopping_metric": "bleu", "val_bleu_sentences": 0}},
     "train.early_stopping_metric: bleu needs validation BLEU; set train.val_bleu_sentences above 0"),
    ({"train": {"early_stopping_metric": "chrf"}},
     "train.early_stopping_metric: 'chrf' is not valid; choose one of loss, bleu"),
    ({"train": {"val_bleu_sentences": -1}}, "train.val_bleu_sentences: must be >= 0"),
    ({"trian": {}}, "params: unknown block(s) trian"),
    # #69: the number YAML reads as text is written for it, and the valid blocks leave out model_train, refused too
    ({"train": {"lr": "1e-3"}}, "train.lr: expected float, got '1e-3' (YAML reads 1e-3 as text, not a number); "
                                "write 1.0e-3"),
    ({"train": {"budget": {"kind": "flops", "value": "2.0e15"}}}, "got '2.0e15' (YAML reads 2.0e15 as text, not a "
                                                                  "number); write 2.0e+15"),
    ({"analyze": {"device": "tpu"}}, "analyze.device: 'tpu' is not valid; choose one of cpu, cuda"),
    ({"analyze": {"lengths": [8]}}, "analyze.lengths: expected at least two positive integers"),
    ({"analyze": {"roles": {"rnn": "gpt"}}}, "analyze.roles.rnn: 'gpt' is not valid; choose one of rnn, gru"),
    ({"analyze": {"gradient_models": ["rnn"]}}, "analyze.gradient_models: add gru (role gru of claim 4)"),
    ({"analyze": {"train_length": 150}}, "analyze.train_length: must be in [min_length, 100]"),
    ({"analyze": {"tasks": []}}, "analyze.tasks: empty; name at least one of copy, reverse, agreement"),
    ({"train": {"seed": 1}}, "train.seed: replaced by the top-level list `seeds` (e.g. seeds: [42]); move it there"),
    ({"seeds": []}, "seeds: expected a list of distinct integers from 0 to 2**32 - 1 (numpy's range of seeds), e.g. "
                    "[42] or [1, 2, 3], got []"),
    ({"seeds": [-1]}, "seeds: expected a list of distinct integers from 0 to 2**32 - 1"),  # numpy's refusal in train
    ({"seeds": [2**32]}, "seeds: expected a list of distinct integers from 0 to 2**32 - 1"),
    ({"seeds": [1, 1]}, "seeds: expected a list of distinct integers"),
    ({"seeds": 42}, "seeds: expected a list of distinct integers"),
    ({"seeds": [1, 2]}, "beam_sweep.seed: 42 is not in seeds [1, 2]; choose one of them"),
    ({"compare": {"baseline": "gpt"}}, "compare.baseline: 'gpt' is not a model of params.yaml; choose one of rnn, gru"),
    ({"compare": {"bootstrap_seed": 0}}, "compare.bootstrap_seed: must be > 0, got 0"),
    ({"compare": {"bootstrap_resamples": 0}}, "compare.bootstrap_resamples: must be > 0, got 0"),
    ({"compare": {"length_buckets": [12, 8]}}, "compare.length_buckets: expected increasing positive integers"),
    ({"compare": {"length_buckets": []}}, "compare.length_buckets: expected increasing positive integers"),
    ({"compare": {"examples": [-1]}}, "compare.examples: expected sentence indices (integers >= 0), got [-1]"),
    # a misshaped compare.published entry is named down to its model and key (#44)
    ({"compare": {"published": {"transformer": {"split": "test_2016_flickr"}}}},
     "compare.published.transformer.bleu: missing; add `bleu: <float>` to the block"),
    ({"compare": {"published": {"transformer": {"bleu": 41.0, "split": "test_2016_flickr"}}}},
     "compare.published.transformer.source: missing; add `source: <str>` to the block"),
    ({"compare": {"published": {"transformer": 41.0}}},
     "compare.published.transformer: expected a block of `key: value` lines, got 41.0; indent its keys under "
     "`transformer:`"),
    ({"compare": {"published": {"transformer": {"bleu": "high", "split": "test_2016_flickr", "source": "a"}}}},
     "compare.published.transformer.bleu: expected float, got 'high'"),
    ({"compare": {"published": {"transformer": {"bleu": 141, "split": "test_2016_flickr", "source": "a"}}}},
     "compare.published.transformer.bleu: must be in [0, 100], got 141.0"),
    ({"compare": {"published": {"transformer": {"bleu": 41, "split": "test_2018", "source": "a"}}}},
     "compare.published.transformer.split: 'test_2018' is not valid; choose one of test_2016_flickr, test_2017_flickr"),
    ({"compare": {"published": {"transformer": {"bleu": 41, "split": "test_2016_flickr", "source": ""}}}},
     "compare.published.transformer.source: needs at least 1 character(s), got ''"),
    ({"compare": {"published": {"transformer": {"bleu": 41, "split": "test_2016_flickr", "source": "a", "url": 1}}}},
     "compare.published.transformer: unknown key(s) url; valid keys are bleu, split, source"),
    ({"compare": {"published": {"gpt": {"bleu": 41, "split": "test_2016_flickr", "source": "a"}}}},
     "compare.published: 'gpt' is not valid; choose one of rnn, gru"),
    ({"compare": {"published": [41.0]}}, "compare.published: expected dict, got [41.0]"),
    ({"tune": {"space": {"rnn": 5}}}, "tune.space: expected model family -> {hyperparameter: range}, e.g. "
                                      "{transformer: {lr: {low: 1.0e-4, high: 3.0e-3, log: true}}}"),
    ({"tune": {"space": {"rnn": {"lr": {"choices": []}}}}},
     "tune.space.rnn.lr.choices: needs at least 1 item(s), got []"),
])
def test_bad_params_name_the_key_and_the_fix(override, message):
    with pytest.raises(ConfigError) as error:
        parse_params(merge(raw(), override))
    assert message in str(error.value)


def test_files_and_hub_sources_take_any_languages_and_split_names():
    files = {"source": {"kind": "files", "path": "/data/my-corpus"}, "src_lang": "en", "tgt_lang": "sw",
             "eval_splits": ["mytest", "flores"]}
    params = parse_params(merge(raw(), {"data": files, "beam_sweep": {"split": "flores"}}))
    assert (params.data.source.kind, params.data.source.path, params.data.pair) == ("files", "/data/my-corpus", "en-sw")
    assert params.data.splits == ["train", "val", "mytest", "flores"]
    assert params.beam_sweep.split == "flores" and params.report.attention_split is None  # None: the first test set
    hub = {"kind": "hub", "name": "wmt/wmt14", "config": "de-en",
           "splits": {"val": "validation", "newstest2014": "test"}}
    source = parse_params(merge(raw(), {"data": {"source": hub, "eval_splits": ["newstest2014"]}})).data.source
    assert [source.dataset_split(s) for s in ("train", "val", "newstest2014")] == ["train", "validation", "test"]


def test_seeds_make_the_grid_and_each_run_its_folder():
    params = parse_params(merge(raw(), {"seeds": [1, 2, 3], "beam_sweep": {"seed": 2}}))
    assert params.seeds == [1, 2, 3] and params.beam_sweep.seed == 2
    assert load_params("params.yaml").seeds == [42]


def test_unknown_model_lists_the_defined_ones():
    with pytest.raises(ConfigError, match="unknown model 'gpt'; params.yaml defines: rnn, gru, lstm, "):
        load_params("params.yaml").model_block("gpt")


def test_missing_params_file_says_where_to_run(tmp_path):
    with pytest.raises(ConfigError, match="no such params file"):
        load_params(tmp_path / "params.yaml")


@pytest.mark.parametrize("profile", ["smoke", "gpu", "own_corpus"])
def test_every_profile_overrides_only_known_keys(profile):
    with open(f"profiles/{profile}.yaml") as f:
        overrides = yaml.safe_load(f)
    params = parse_params(apply_profile(raw(), overrides))
    assert set(params.models) == set(raw()["models"])  # a profile adjusts the grid, never adds a model by a typo
    for name, block in params.models.items():
        model_config(name, block)  # every overridden key exists in its family


@pytest.mark.parametrize("profile, source, pair, eval_splits, models", [
    ("iwslt2017_deen", ("hub", "IWSLT/iwslt2017", "iwslt2017-de-en"), "de-en", ["test"],
     ["transformer", "gru_attention"]),
    ("wmt14_ende", ("hub", "wmt/wmt14", "de-en"), "en-de", ["newstest2014"], ["transformer", "lstm_attention"]),
])
def test_recipes_bring_their_corpus_and_replace_the_grid(profile, source, pair, eval_splits, models):
    with open(f"profiles/{profile}.yaml") as f:
        params = parse_params(apply_profile(raw(), yaml.safe_load(f)))
    assert (params.data.source.kind, params.data.source.name, params.data.source.config) == source
    assert (params.data.pair, params.data.eval_splits, list(params.models)) == (pair, eval_splits, models)
    assert params.data.source.dataset_split("val") == "validation"
    assert (params.compare.baseline, params.beam_sweep.model) == ("transformer", "transformer")
    for name, block in params.models.items():
        model_config(name, block)


def test_the_converged_profile_is_the_grid_regularised_and_stopped_on_val_bleu():
    with open("profiles/converge_cpu.yaml") as f:
        params = parse_params(apply_profile(raw(), yaml.safe_load(f)))
    assert list(params.models) == list(raw()["models"])  # every model of the grid, in its order
    for name, block in params.models.items():  # the grid's own models, but for the shared dropout
        assert block == {**raw()["models"][name], "dropout": 0.3}
        model_config(name, block)
    assert (params.train.budget.kind, params.train.early_stopping_metric, params.train.val_bleu_sentences) == (
        "none", "bleu", None)
    assert params.train.early_stopping_patience > 0
def test_the_joeynmt_profile_builds_joeynmts_iwslt14_rnn_on_one_vocabulary_per_side():
    """JoeyNMT's iwslt14_deen_bpe.yaml layer by layer (all but its bridge), with the profile's 8,000 pieces a side."""
    with open("profiles/joeynmt_rnn.yaml") as f:
        params = parse_params(apply_profile(raw(), yaml.safe_load(f)))
    assert (params.data.pair, params.tokenize.joint, params.tokenize.vocab_size) == ("de-en", False, 8000)
    assert list(params.models) == [params.compare.baseline] == [params.beam_sweep.model] == ["joeynmt_gru"]
    model = build_model("joeynmt_gru", params.models["joeynmt_gru"], Vocab.of(8000, 8000))
    layers = {name: sum(p.numel() for p in layer.parameters()) for name, layer in model.named_children()}
    assert layers == {
        "embed": 8000 * 620, "target_embed": 8000 * 620, "output": 1000 * 8000,  # three matrices
        "encoder": 2 * 3 * (500 * 620 + 500 * 500 + 2 * 500),  # GRU, 500 a direction, on embeddings of 620
        "decoder": 3 * (1000 * (620 + 1000) + 1000 * 1000 + 2 * 1000),  # input feeding: embedding and a_{t-1}
        "scorer": 1000 * 1000 + 1000 * 1000 + 1000,  # Bahdanau: key and query projections, energy vector
        "pre_output": 2000 * 1000 + 1000}  # a_t = tanh(W [h_t; c_t]) of 1000
    assert model.num_parameters() == 33_154_000


def test_the_peer_rnn_untied_as_joeynmt_has_its_parameters_but_the_bridge():
    """profiles/peer.yaml's joeynmt_rnn with JoeyNMT's tying (one embedding for both sides, an output layer of its own
    reading 512-wide attentional vectors): the peer's 14,812,672 parameters less its bridge, a 512 x 512 layer."""
    with open("profiles/peer.yaml") as f:
        block = yaml.safe_load(f)["models"]["joeynmt_rnn"]
    joeynmt = {**block, "tie_embeddings": "source_target", "attentional_dim": 512}
    assert build_model("m", block, Vocab.of(8000)).num_parameters() == 9_667_328
    assert build_model("m", joeynmt, Vocab.of(8000)).num_parameters() == 14_812_672 - (512 * 512 + 512)


def test_a_model_blocks_own_train_recipe_overrides_the_shared_train_block_for_that_model_only():
    params = parse_params(merge(raw(), {"models": {"gru": {"train": {"lr": 0.005, "budget": {"kind": "none"}}}}}))
    assert "train" not in params.models["gru"]  # the architecture block reaches the model builder without it
    model_config("gru", params.models["gru"])
    own = params.for_model("gru").train
    assert (own.lr, own.budget.kind, own.batch_tokens) == (0.005, "none", params.train.batch_tokens)
    assert params.for_model("rnn").train == params.train == load_params("params.yaml").train


@pytest.mark.parametrize("recipe, message", [
    ({"lrr": 0.1}, r"^models\.gru\.train: unknown key\(s\) lrr; valid keys are batch_tokens"),
    ({"lr": "fast"}, r"^models\.gru\.train\.lr: expected float, got 'fast'"),
    (0.005, r"^models\.gru\.train: expected train keys, e\.g\. \{lr: 0\.005\}, got 0\.005"),
    # a block inside the recipe is named under the model, not as the shared train.budget (#44)
    ({"budget": {"kind": "joules"}}, r"^models\.gru\.train\.budget\.kind: 'joules' is not valid; choose one of none"),
    ({"budget": 5}, r"^models\.gru\.train\.budget: expected a block of `key: value` lines, got 5; indent its keys "
                    r"under `budget:`"),
])
def test_a_bad_train_recipe_is_refused_when_the_params_load(recipe, message):
    with pytest.raises(ConfigError, match=message):
        parse_params(merge(raw(), {"models": {"gru": {"train": recipe}}}))
    with pytest.raises(ConfigError, match=r"^params: unknown block model_train; give a model its own train keys"):
        parse_params({**raw(), "model_train": {"gru": {"lr": 0.1}}})


@pytest.mark.parametrize("profiles", [["published"], ["published", "published_cpu"]])
def test_the_published_profiles_set_the_papers_text_and_each_models_recipe(profiles):
    merged = raw()
    for profile in profiles:
        with open(f"profiles/{profile}.yaml") as f:
            merged = apply_profile(merged, yaml.safe_load(f))
    params = parse_params(merged)
    assert (params.data.preprocess, params.tokenize.joint, list(params.models)) == (
        "moses_lowercase", True, ["transformer_tiny", "gru_attention"])
    tiny = params.for_model("transformer_tiny").train
    # the recipe stops on val loss (fairseq's --best-checkpoint-metric); the hour-long CPU run keeps val BLEU
    assert (tiny.lr, tiny.early_stopping_metric) == ((0.003, "bleu") if len(profiles) > 1 else (0.005, "loss"))
    for name, block in params.models.items():
        model_config(name, block)
    assert params.for_model("gru_attention").train.lr == (0.002 if len(profiles) > 1 else 0.0004)


def test_the_valid_blocks_named_for_an_unknown_one_are_all_accepted():
    """#69: model_train, a field the models' own train keys fill, was listed as valid, and refused when given."""
    with pytest.raises(ConfigError) as error:
        parse_params(merge(raw(), {"trian": {}}))
    valid = str(error.value).split("valid blocks are ")[1].split(", ")
    assert "train" in valid and "model_train" not in valid
