"""Typed views of params.yaml, validated with one-line errors that name the key and the fix."""
from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from nmtbench.data.sources import MULTI30K_LANGUAGES, MULTI30K_SPLITS, file_name, load_checksums

SOURCE_KINDS = ("multi30k", "files", "hub")


class ConfigError(ValueError):
    """A bad value in params.yaml; the message names the key and what would be valid."""


def choice(where: str, value: Any, valid: typing.Iterable[Any]) -> Any:
    """Return value if it is one of valid, else raise naming every valid choice."""
    valid = tuple(valid)
    if value not in valid:
        raise ConfigError(f"{where}: {value!r} is not valid; choose one of {', '.join(map(str, valid))}")
    return value


def positive(where: str, value: float, allow_zero: bool = False) -> float:
    if value < 0 or (value == 0 and not allow_zero):
        raise ConfigError(f"{where}: must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return value


def from_dict(cls: type, values: dict | None, where: str):
    """Build dataclass cls from a params block, refusing unknown keys and wrongly typed values."""
    if values is not None and not isinstance(values, dict):
        raise ConfigError(f"{where}: expected a block of `key: value` lines, got {values!r}; "
                          f"indent its keys under `{where.rsplit('.', 1)[-1]}:`")
    values = dict(values or {})
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; valid keys are {', '.join(fields)}")
    hints = typing.get_type_hints(cls)
    for name, value in values.items():
        expected = hints[name]
        allowed = typing.get_args(expected) or (expected,)
        allowed = tuple(typing.get_origin(a) or a for a in allowed)
        if float in allowed and isinstance(value, int) and not isinstance(value, bool):
            values[name] = value = float(value)
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            names = " or ".join("null" if a is type(None) else a.__name__ for a in allowed)
            raise ConfigError(f"{where}.{name}: expected {names}, got {value!r}")
    return cls(**values)


@dataclass
class SourceConfig:
    """Where the parallel text comes from: Multi30k (checksummed), a folder of files, or a Hugging Face dataset."""
    kind: str = "multi30k"
    path: str | None = None  # files: the corpus folder; every kind: what the DVC prepare stage depends on
    name: str | None = None  # hub: the dataset id, or a local folder load_dataset reads
    config: str | None = None  # hub: the dataset's configuration, e.g. de-en
    revision: str | None = None  # hub: a branch, tag or commit of the dataset repository
    splits: dict = field(default_factory=dict)  # hub: our split name -> the dataset's; unnamed ones map to themselves

    def __post_init__(self):
        choice("data.source.kind", self.kind, SOURCE_KINDS)
        if self.kind == "files" and not self.path:
            raise ConfigError("data.source.path: kind files needs the corpus folder, e.g. path: /data/my-corpus")
        if self.kind == "hub" and not self.name:
            raise ConfigError("data.source.name: kind hub needs a dataset id, e.g. name: wmt/wmt14")
        for ours, theirs in self.splits.items():
            if not (isinstance(ours, str) and isinstance(theirs, str)):
                raise ConfigError(f"data.source.splits: expected our split name -> the dataset's split name, "
                                  f"got {ours!r}: {theirs!r}")

    def dataset_split(self, split: str) -> str:
        return self.splits.get(split, split)


@dataclass
class DataConfig:
    src_lang: str = "en"
    tgt_lang: str = "de"
    eval_splits: list = field(default_factory=lambda: list(MULTI30K_SPLITS[2:]))
    source: SourceConfig | dict = field(default_factory=SourceConfig)
    max_train_pairs: int | None = None
    max_eval_pairs: int | None = None
    max_length: int = 80
    max_length_ratio: float = 3.0
    num_proc: int | None = None  # processes filtering a large split; None: one per CPU core

    def __post_init__(self):
        if isinstance(self.source, dict):
            self.source = from_dict(SourceConfig, self.source, "data.source")
        if self.source.kind == "multi30k":
            self._check_multi30k()
        for key in ("src_lang", "tgt_lang"):
            if not isinstance(getattr(self, key), str) or not getattr(self, key):
                raise ConfigError(f"data.{key}: expected a language code as the source names it, e.g. en")
        if self.src_lang == self.tgt_lang:
            raise ConfigError(f"data.tgt_lang: {self.tgt_lang!r} is also data.src_lang; choose another language")
        if not self.eval_splits:
            raise ConfigError("data.eval_splits: empty; list at least one test set to evaluate, "
                              "e.g. [test_2016_flickr]")
        if (len(set(self.eval_splits)) != len(self.eval_splits)
                or not all(isinstance(s, str) and s and s != "train" for s in self.eval_splits)):
            raise ConfigError(f"data.eval_splits: expected distinct split names other than train, e.g. [test], "
                              f"got {self.eval_splits!r}")
        positive("data.max_length", self.max_length)
        positive("data.max_length_ratio", self.max_length_ratio)
        for key in ("max_train_pairs", "max_eval_pairs", "num_proc"):
            if getattr(self, key) is not None:
                positive(f"data.{key}", getattr(self, key))

    def _check_multi30k(self):
        choice("data.src_lang", self.src_lang, MULTI30K_LANGUAGES)
        choice("data.tgt_lang", self.tgt_lang, [lang for lang in MULTI30K_LANGUAGES if lang != self.src_lang])
        for split in self.eval_splits:
            choice("data.eval_splits", split, MULTI30K_SPLITS[1:])
        checksums = load_checksums()
        for split in self.eval_splits:
            for lang in (self.src_lang, self.tgt_lang):
                if file_name(split, lang) not in checksums:
                    raise ConfigError(f"data.eval_splits: Multi30k's {split} has no {lang!r}; "
                                      "remove it from eval_splits")

    @property
    def pair(self) -> str:
        return f"{self.src_lang}-{self.tgt_lang}"

    @property
    def splits(self) -> list[str]:
        """Every split the prepare stage reads, in order: train, val, then the test sets."""
        return list(dict.fromkeys(["train", "val", *self.eval_splits]))


@dataclass
class TokenizeConfig:
    model_type: str = "bpe"
    vocab_size: int = 8000
    character_coverage: float = 1.0
    sample_sentences: int = 2_000_000

    def __post_init__(self):
        choice("tokenize.model_type", self.model_type, ("bpe", "unigram"))
        positive("tokenize.sample_sentences", self.sample_sentences)
        if self.vocab_size < 8:
            raise ConfigError(f"tokenize.vocab_size: must be at least 8, got {self.vocab_size}")
        if not 0 < self.character_coverage <= 1:
            raise ConfigError(f"tokenize.character_coverage: must be in (0, 1], got {self.character_coverage}")


@dataclass
class BudgetConfig:
    """The cost at which training stops, the same for every model: none, wall-clock seconds or training FLOPs."""
    kind: str = "none"
    value: float | None = None

    def __post_init__(self):
        choice("train.budget.kind", self.kind, ("none", "time", "flops"))
        if self.kind != "none" and self.value is None:
            raise ConfigError(f"train.budget.value: budget kind {self.kind} needs a value (seconds for time, "
                              "FLOPs for flops, e.g. 2.0e+15)")
        if self.value is not None:
            positive("train.budget.value", self.value)


@dataclass
class TrainConfig:
    batch_tokens: int = 4096
    max_epochs: int = 30
    max_steps: int = -1
    budget: BudgetConfig | dict = field(default_factory=BudgetConfig)
    lr: float = 7e-4
    warmup_steps: int = 400
    label_smoothing: float = 0.1
    gradient_clip_val: float = 1.0
    val_check_interval: float = 1.0
    schedule: str = "inverse_sqrt"
    early_stopping_patience: int = 0
    early_stopping_metric: str = "loss"
    val_bleu_sentences: int | None = 0
    accumulate_grad_batches: int = 1
    accelerator: str = "cpu"
    devices: int = 1
    num_nodes: int = 1
    strategy: str = "auto"
    precision: str = "32-true"
    deterministic: bool = False
    num_threads: int = 0
    num_workers: int = 0
    compile: bool = False
    checkpoint_every_steps: int = 0
    average_last: int = 0

    def __post_init__(self):
        if isinstance(self.budget, dict):
            self.budget = from_dict(BudgetConfig, self.budget, "train.budget")
        positive("train.checkpoint_every_steps", self.checkpoint_every_steps, allow_zero=True)
        positive("train.average_last", self.average_last, allow_zero=True)
        positive("train.batch_tokens", self.batch_tokens)
        positive("train.max_epochs", self.max_epochs)
        if self.max_steps != -1 and self.max_steps <= 0:
            raise ConfigError(f"train.max_steps: must be > 0, or -1 for no step limit; got {self.max_steps}")
        positive("train.lr", self.lr)
        positive("train.warmup_steps", self.warmup_steps, allow_zero=True)
        positive("train.gradient_clip_val", self.gradient_clip_val, allow_zero=True)
        positive("train.num_threads", self.num_threads, allow_zero=True)
        positive("train.num_workers", self.num_workers, allow_zero=True)
        if not 0 <= self.label_smoothing < 1:
            raise ConfigError(f"train.label_smoothing: must be in [0, 1), got {self.label_smoothing}")
        choice("train.schedule", self.schedule, ("inverse_sqrt", "cosine", "plateau", "constant"))
        positive("train.early_stopping_patience", self.early_stopping_patience, allow_zero=True)
        choice("train.early_stopping_metric", self.early_stopping_metric, ("loss", "bleu"))
        if self.val_bleu_sentences is not None:
            positive("train.val_bleu_sentences", self.val_bleu_sentences, allow_zero=True)
        if self.early_stopping_metric == "bleu" and self.val_bleu_sentences == 0:
            raise ConfigError("train.early_stopping_metric: bleu needs validation BLEU; set train.val_bleu_sentences "
                              "above 0 (or null for the whole val split)")
        positive("train.accumulate_grad_batches", self.accumulate_grad_batches)
        positive("train.devices", self.devices)
        positive("train.num_nodes", self.num_nodes)
        choice("train.accelerator", self.accelerator, ("auto", "cpu", "gpu"))
        choice("train.strategy", self.strategy, ("auto", "ddp"))
        choice("train.precision", self.precision, ("32-true", "bf16-mixed", "16-mixed"))


@dataclass
class DecodeConfig:
    beam: int = 5
    alpha: float = 1.0
    length_penalty: str = "gnmt"
    min_len: int = 0
    no_repeat_ngram: int = 0
    batch_size: int = 64
    max_len_a: float = 1.5
    max_len_b: int = 10
    batch_tokens: int | None = None  # None: batches bounded by batch_size alone
    device: str = "auto"
    precision: str | int = "32"  # 32, or bf16 autocast

    def __post_init__(self):
        positive("evaluate.beam", self.beam)
        positive("evaluate.alpha", self.alpha, allow_zero=True)
        choice("evaluate.length_penalty", self.length_penalty, ("none", "normalize", "gnmt"))
        positive("evaluate.min_len", self.min_len, allow_zero=True)
        positive("evaluate.no_repeat_ngram", self.no_repeat_ngram, allow_zero=True)
        positive("evaluate.batch_size", self.batch_size)
        positive("evaluate.max_len_a", self.max_len_a, allow_zero=True)
        positive("evaluate.max_len_b", self.max_len_b, allow_zero=True)
        if self.batch_tokens is not None:
            positive("evaluate.batch_tokens", self.batch_tokens)
        choice("evaluate.device", self.device, ("auto", "cpu", "cuda"))
        choice("evaluate.precision", str(self.precision), ("32", "bf16"))
        self.precision = str(self.precision)  # YAML reads 32 as a number


def resolve_device(setting: str, key: str):
    """The torch device of a device setting: auto is cuda when torch sees a GPU, else cpu."""
    import torch

    if setting == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"{key}: cuda, but torch finds no CUDA GPU on this machine; use {key} auto or cpu, "
                          "or run where a GPU and a CUDA build of torch are")
    if setting == "auto":
        setting = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(setting)


@dataclass
class BeamSweepConfig:
    model: str | None = None  # a name from models; the stage refuses to run without one
    seed: int = 42  # which of the model's runs (one of seeds)
    split: str | None = None  # None: the first of data.eval_splits
    beams: list = field(default_factory=lambda: [1, 2, 4, 8, 12])
    alphas: list = field(default_factory=lambda: [0.0, 1.0])
    max_sentences: int | None = None

    def __post_init__(self):
        if not self.beams or not all(isinstance(b, int) and b > 0 for b in self.beams):
            raise ConfigError(f"beam_sweep.beams: expected a list of positive integers, got {self.beams!r}")
        if not self.alphas or not all(isinstance(a, (int, float)) and a >= 0 for a in self.alphas):
            raise ConfigError(f"beam_sweep.alphas: expected a list of numbers >= 0, got {self.alphas!r}")
        if self.max_sentences is not None:
            positive("beam_sweep.max_sentences", self.max_sentences)


# what each claim compares: analyze.roles maps every role to one of analyze.models
ANALYZE_ROLES = ("rnn", "gru", "lstm", "transformer", "cnn", "bottleneck", "attention", "sinusoidal", "learned",
                 "decoder_only", "encoder_decoder")


@dataclass
class AnalyzeConfig:
    device: str = "cpu"
    seed: int = 0
    width: int = 64
    param_widths: list = field(default_factory=lambda: [32, 64, 128])
    lengths: list = field(default_factory=lambda: [8, 16, 32, 64, 128, 256, 512, 1024])
    batch_size: int = 4
    vocab_size: int = 20
    repeats: int = 3
    models: dict = field(default_factory=dict)  # name -> model block; sizes may be written d, 2d, 4d, ...
    gradient_models: list = field(default_factory=list)
    probe_length: int = 32
    probe_rows: int = 8
    probe_steps: int = 100
    batch_tokens: int = 512
    lr: float = 0.003
    warmup_steps: int = 50
    clip: float = 1.0
    roles: dict = field(default_factory=dict)  # role of a claim (e.g. attention) -> a model of analyze.models
    span_threshold: float = 0.01
    synthetic_models: list = field(default_factory=list)
    tasks: list = field(default_factory=lambda: ["copy", "reverse", "agreement"])
    train_length: int = 10
    min_length: int = 5
    synthetic_steps: int = 300
    synthetic_batch: int = 32
    test_examples: int = 20

    def __post_init__(self):
        choice("analyze.device", self.device, ("cpu", "cuda"))
        for key in ("width", "batch_size", "vocab_size", "repeats", "probe_length", "probe_rows", "probe_steps",
                    "batch_tokens", "lr", "train_length", "min_length", "synthetic_steps", "synthetic_batch",
                    "test_examples", "span_threshold"):
            positive(f"analyze.{key}", getattr(self, key))
        positive("analyze.clip", self.clip)
        positive("analyze.warmup_steps", self.warmup_steps, allow_zero=True)
        for key in ("param_widths", "lengths"):
            values = getattr(self, key)
            if len(values) < 2 or not all(isinstance(v, int) and v > 0 for v in values):
                raise ConfigError(f"analyze.{key}: expected at least two positive integers, got {values!r}")
        if not self.models:
            raise ConfigError("analyze.models: define the models to measure, e.g. analyze.models.transformer")
        for key in ("gradient_models", "synthetic_models"):
            for name in getattr(self, key):
                choice(f"analyze.{key}", name, self.models)
        missing = sorted(set(ANALYZE_ROLES) - set(self.roles))
        if missing:
            raise ConfigError(f"analyze.roles: missing {', '.join(missing)}; name a model of analyze.models for each")
        for role, name in self.roles.items():
            choice(f"analyze.roles.{choice('analyze.roles', role, ANALYZE_ROLES)}", name, self.models)
        for role in ("bottleneck", "attention", "sinusoidal", "learned", "decoder_only", "encoder_decoder"):
            if self.roles[role] not in self.synthetic_models:
                raise ConfigError(f"analyze.synthetic_models: add {self.roles[role]} (role {role} of claims 5-7)")
        for role in ("rnn", "gru", "lstm", "transformer"):
            if self.roles[role] not in self.gradient_models:
                raise ConfigError(f"analyze.gradient_models: add {self.roles[role]} (role {role} of claim 4)")
        for task in self.tasks:
            choice("analyze.tasks", task, ("copy", "reverse", "agreement"))
        if not self.min_length <= self.train_length <= 100:
            raise ConfigError(f"analyze.train_length: must be in [min_length, 100] so tests reach 2L <= 200, "
                              f"got {self.train_length}")
        if self.vocab_size < 8:
            raise ConfigError(f"analyze.vocab_size: must be at least 8 (4 special tokens and symbols), "
                              f"got {self.vocab_size}")


@dataclass
class CompareConfig:
    baseline: str | None = None  # a name from models; null: the first model
    bootstrap_resamples: int = 1000
    bootstrap_seed: int = 12345
    length_buckets: list = field(default_factory=lambda: [8, 12, 16, 20])
    examples: list = field(default_factory=lambda: [0, 100, 500])

    def __post_init__(self):
        positive("compare.bootstrap_resamples", self.bootstrap_resamples)
        positive("compare.bootstrap_seed", self.bootstrap_seed)  # sacreBLEU reads seed 0 as "no seed"
        bounds = self.length_buckets
        if not bounds or not all(isinstance(b, int) and b > 0 for b in bounds) or sorted(set(bounds)) != bounds:
            raise ConfigError(f"compare.length_buckets: expected increasing positive integers (the longest source, "
                              f"in words, of each bucket), got {bounds!r}")
        if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in self.examples):
            raise ConfigError(f"compare.examples: expected sentence indices (integers >= 0), got {self.examples!r}")


@dataclass
class WandbConfig:
    project: str = "nmtbench"
    mode: str = "offline"
    group: str = "default"

    def __post_init__(self):
        choice("wandb.mode", self.mode, ("offline", "online", "disabled"))


@dataclass
class ReportConfig:
    attention_split: str | None = None  # None: the first of data.eval_splits
    attention_sentence: int = 0

    def __post_init__(self):
        positive("report.attention_sentence", self.attention_sentence, allow_zero=True)


@dataclass
class Params:
    data: DataConfig
    tokenize: TokenizeConfig
    train: TrainConfig
    evaluate: DecodeConfig
    beam_sweep: BeamSweepConfig
    wandb: WandbConfig
    report: ReportConfig
    compare: CompareConfig
    models: dict  # name -> raw block; models.registry validates and builds each
    seeds: list = field(default_factory=lambda: [42])  # the grid is models x seeds
    analyze: AnalyzeConfig | None = None  # only the analyze stage reads it

    def model_block(self, name: str) -> dict:
        if name not in self.models:
            raise ConfigError(
                f"unknown model {name!r}; params.yaml defines: {', '.join(self.models)} (add a models.{name} block)"
            )
        return self.models[name]


def parse_params(raw: dict) -> Params:
    if not isinstance(raw, dict):
        raise ConfigError("params: expected blocks such as `train:` and `models:`, "
                          f"got {type(raw).__name__} {raw!r:.60}")
    sections = {"data": DataConfig, "tokenize": TokenizeConfig, "train": TrainConfig,
                "evaluate": DecodeConfig, "beam_sweep": BeamSweepConfig, "wandb": WandbConfig,
                "compare": CompareConfig, "report": ReportConfig}
    unknown = sorted(set(raw) - set(sections) - {"models", "seeds", "analyze"})
    if unknown:
        raise ConfigError(f"params: unknown block(s) {', '.join(unknown)}; valid blocks are "
                          f"{', '.join([*sections, 'models', 'seeds', 'analyze'])}")
    if isinstance(raw.get("train"), dict) and "seed" in raw["train"]:
        raise ConfigError("train.seed: replaced by the top-level list `seeds` (e.g. seeds: [42]); move it there")
    seeds = raw.get("seeds", [42])
    if (not isinstance(seeds, list) or not seeds or len(set(seeds)) != len(seeds)
            or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)):
        raise ConfigError(f"seeds: expected a list of distinct integers, e.g. [42] or [1, 2, 3], got {seeds!r}")
    built = {key: from_dict(cls, raw.get(key), key) for key, cls in sections.items()}
    models = raw.get("models") or {}
    if not isinstance(models, dict) or not models:
        raise ConfigError("models: define at least one model block, e.g. models.transformer")
    if built["beam_sweep"].model not in (None, *models):
        raise ConfigError(f"beam_sweep.model: {built['beam_sweep'].model!r} is not a model of params.yaml; "
                          f"choose one of {', '.join(models)}")
    if built["compare"].baseline not in (None, *models):
        raise ConfigError(f"compare.baseline: {built['compare'].baseline!r} is not a model of params.yaml; "
                          f"choose one of {', '.join(models)}")
    if built["beam_sweep"].seed not in seeds:
        raise ConfigError(f"beam_sweep.seed: {built['beam_sweep'].seed} is not in seeds {seeds}; choose one of them")
    for where, split in (("beam_sweep.split", built["beam_sweep"].split),
                         ("report.attention_split", built["report"].attention_split)):
        if split is not None:
            choice(where, split, built["data"].splits[1:])
    analyze = from_dict(AnalyzeConfig, raw["analyze"], "analyze") if "analyze" in raw else None
    return Params(**built, models=models, seeds=seeds, analyze=analyze)


def load_params(path: str | Path = "params.yaml") -> Params:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such params file; run from the project root or pass --params")
    return parse_params(read_yaml(path) or {})


def read_yaml(path: Path) -> Any:
    """The YAML document in path; a syntax error becomes one line naming the file, line and column."""
    try:
        return yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ConfigError(f"{path}{where}: not valid YAML ({problem}); fix the syntax there") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start}); save it as UTF-8") from None


def merge(base: dict, override: dict) -> dict:
    """Deep-merge override onto base (dicts merge key by key; any other value replaces)."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def apply_profile(base: dict, profile: dict) -> dict:
    """params.yaml with a profile merged on. The blocks a profile names in its list `replace` are taken from the
    profile whole instead of merged: a recipe's own grid of models (models: ...) rather than the defaults plus it."""
    profile = dict(profile)
    replaced = profile.pop("replace", [])
    if not isinstance(replaced, list) or not set(replaced) <= set(base):
        raise ConfigError(f"replace: expected a list of params blocks the profile gives whole, e.g. [models], "
                          f"got {replaced!r}")
    return merge({key: value for key, value in base.items() if key not in replaced}, profile)

