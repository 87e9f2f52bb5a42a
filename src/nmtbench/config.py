"""Typed views of params.yaml: one Block per stage's block, and the checks across blocks. Reading the file is
nmtbench.files' (read_yaml), merging profiles onto it nmtbench.profiles'.

Every block is a nmtbench.param_blocks.Block, validated with one-line errors that name the key and the fix; the model
families' configs (nmtbench.models) are Blocks too, and the registry validates each models.<name> block.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from nmtbench.files import read_yaml
from nmtbench.multi30k import MULTI30K_LANGUAGES, MULTI30K_SPLITS, file_name, load_checksums
from nmtbench.param_blocks import Block, ConfigError, choice, distinct, from_dict, holds


class SourceConfig(Block):
    """Where the parallel text comes from: Multi30k (checksummed), a folder of files, or a Hugging Face dataset."""
    where: ClassVar[str] = "data.source"
    kind: Literal["multi30k", "files", "hub"] = "multi30k"
    path: str | None = None  # files: the corpus folder; every kind: what the DVC prepare stage depends on
    name: str | None = None  # hub: the dataset id, or a local folder load_dataset reads
    config: str | None = None  # hub: the dataset's configuration, e.g. de-en
    revision: str | None = None  # hub: a branch, tag or commit of the dataset repository
    splits: dict = {}  # hub: our split name -> the dataset's; unnamed ones map to themselves

    @model_validator(mode="after")
    def _kind_has_what_it_reads(self):
        if self.kind == "files" and not self.path:
            raise ConfigError("data.source.path: kind files needs the corpus folder, e.g. path: /data/my-corpus")
        if self.kind == "hub" and not self.name:
            raise ConfigError("data.source.name: kind hub needs a dataset id, e.g. name: wmt/wmt14")
        for ours, theirs in self.splits.items():  # checked here, not by dict[str, str], to name the bad pair
            if not (isinstance(ours, str) and isinstance(theirs, str)):
                raise ConfigError(f"data.source.splits: expected our split name -> the dataset's split name, "
                                  f"got {ours!r}: {theirs!r}")
        return self

    def dataset_split(self, split: str) -> str:
        return self.splits.get(split, split)


LANGUAGE = "expected a language code as the source names it, e.g. en"
EXTERNAL_DIR = "systems"  # outside systems' translations (compare.external); the compare stage depends on it
EvalSplits = Annotated[list[str], holds(lambda splits: distinct(splits) and all(splits) and "train" not in splits)]


class DataConfig(Block):
    where: ClassVar[str] = "data"
    src_lang: str = Field("en", min_length=1, description=LANGUAGE)
    tgt_lang: str = Field("de", min_length=1, description=LANGUAGE)
    eval_splits: EvalSplits = Field(list(MULTI30K_SPLITS[2:]), description="expected distinct split names "
                                    "other than train, e.g. [test], got {value!r}")
    source: SourceConfig = Field(default_factory=SourceConfig)
    max_train_pairs: int | None = Field(None, gt=0)
    max_eval_pairs: int | None = Field(None, gt=0)
    max_length: int = Field(80, gt=0)
    max_length_ratio: float = Field(3.0, gt=0)
    num_proc: int | None = Field(None, gt=0)  # processes filtering a large split; None: one per CPU core
    # none: the text as the source has it; moses_lowercase: the published Multi30k systems' text (data/preprocess.py)
    preprocess: Literal["none", "moses_lowercase"] = "none"

    @model_validator(mode="after")
    def _languages_and_test_sets(self):
        if self.source.kind == "multi30k":
            self._check_multi30k()
        if self.src_lang == self.tgt_lang:
            raise ConfigError(f"data.tgt_lang: {self.tgt_lang!r} is also data.src_lang; choose another language")
        if not self.eval_splits:  # its own line rather than the field's: the fix names a test set
            raise ConfigError("data.eval_splits: empty; list at least one test set to evaluate, "
                              "e.g. [test_2016_flickr]")
        return self

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
    def tokenized(self) -> bool:
        """Whether every split, the references included, is the papers' lowercased Moses tokens, which scoring then
        scores as they are (nmtbench.evaluation.scoring.score)."""
        return self.preprocess != "none"

    @property
    def splits(self) -> list[str]:
        """Every split the prepare stage reads, in order: train, val, then the test sets."""
        return list(dict.fromkeys(["train", "val", *self.eval_splits]))


class TokenizeConfig(Block):
    where: ClassVar[str] = "tokenize"
    model_type: Literal["bpe", "unigram"] = "bpe"
    joint: bool = True  # one sentencepiece model for both sides; false: one per side
    vocab_size: int = Field(8000, ge=8, description="must be at least 8, got {value!r}")
    target_vocab_size: int | None = Field(None, ge=8)  # the target's model, with joint false; None: vocab_size
    character_coverage: float = Field(1.0, gt=0, le=1)
    sample_sentences: int = Field(2_000_000, gt=0)

    @model_validator(mode="after")
    def _target_size_needs_a_target_model(self):
        if self.joint and self.target_vocab_size is not None:
            raise ConfigError("tokenize.target_vocab_size: only read when tokenize.joint is false (one sentencepiece "
                              "model per side); remove it or set joint: false")
        return self


class BudgetConfig(Block):
    """The cost at which training stops, the same for every model: none, wall-clock seconds or training FLOPs."""
    where: ClassVar[str] = "train.budget"
    kind: Literal["none", "time", "flops"] = "none"
    value: float | None = Field(None, gt=0)  # with the kind, or not at all: a kind alone gets no other kind's value

    @model_validator(mode="after")
    def _kind_has_a_value(self):
        if self.kind != "none" and self.value is None:
            raise ConfigError(f"{self.where}.value: budget kind {self.kind} needs a value (seconds for time, "
                              "FLOPs for flops, e.g. 2.0e+15)")
        return self


class TrainConfig(Block):
    where: ClassVar[str] = "train"
    batch_tokens: int = Field(2048, gt=0)
    max_epochs: int = Field(30, gt=0)
    max_steps: Literal[-1] | Annotated[int, Field(gt=0)] = Field(
        -1, description="must be > 0, or -1 for no step limit; got {value!r}")
    budget: BudgetConfig = Field(default_factory=lambda: BudgetConfig(kind="flops", value=3.3e13))
    lr: float = Field(1e-3, gt=0)
    warmup_steps: int = Field(150, ge=0)
    label_smoothing: float = Field(0.1, ge=0, lt=1)
    gradient_clip_val: float = Field(1.0, ge=0)
    val_check_interval: float = 1.0
    schedule: Literal["inverse_sqrt", "cosine", "plateau", "constant"] = "inverse_sqrt"
    early_stopping_patience: int = Field(0, ge=0)
    early_stopping_metric: Literal["loss", "bleu"] = "loss"
    val_bleu_sentences: int | None = Field(500, ge=0)
    accumulate_grad_batches: int = Field(1, gt=0)
    accelerator: Literal["auto", "cpu", "gpu"] = "cpu"
    devices: int = Field(1, gt=0)
    num_nodes: int = Field(1, gt=0)
    strategy: Literal["auto", "ddp"] = "auto"
    precision: Literal["32-true", "bf16-mixed", "16-mixed", "auto"] = "32-true"
    deterministic: bool = False
    num_threads: int = Field(0, ge=0)
    num_workers: int = Field(0, ge=0)
    compile: bool = False
    checkpoint_every_steps: int = Field(100, ge=0)
    average_last: int = Field(0, ge=0)
    average_at: Literal["validations", "epoch_ends"] = "validations"  # which of them average_last counts
    adam_betas: tuple[Annotated[float, Field(ge=0, lt=1)], Annotated[float, Field(ge=0, lt=1)]] = (0.9, 0.98)
    adam_eps: float = Field(1e-9, gt=0)
    weight_decay: float = Field(0.0, ge=0)  # L2 on every parameter but the biases, added to the gradient
    batching: Literal["nmtbench", "fairseq"] = "nmtbench"  # how the training pairs are batched (docs/training.md)

    @field_validator("adam_betas", mode="before")
    @classmethod
    def _betas_as_a_pair(cls, value):
        return tuple(value) if isinstance(value, list) else value  # YAML writes a pair as a list

    @model_validator(mode="after")
    def _bleu_stopping_has_bleu(self):
        if self.early_stopping_metric == "bleu" and self.val_bleu_sentences == 0:
            raise ConfigError("train.early_stopping_metric: bleu needs validation BLEU; set train.val_bleu_sentences "
                              "above 0 (or null for the whole val split)")
        return self


class DecodeConfig(Block):
    where: ClassVar[str] = "evaluate"
    beam: int = Field(5, gt=0)
    alpha: float = Field(1.0, ge=0)
    length_penalty: Literal["none", "normalize", "gnmt"] = "gnmt"
    min_len: int = Field(0, ge=0)
    no_repeat_ngram: int = Field(0, ge=0)
    batch_size: int = Field(64, gt=0)
    max_len_a: float = Field(1.5, ge=0)
    max_len_b: int = Field(10, ge=0)
    batch_tokens: int | None = Field(None, gt=0)  # None: batches bounded by batch_size alone
    device: Literal["auto", "cpu", "cuda"] = "auto"
    precision: Literal["32", "bf16"] = "32"  # 32, or bf16 autocast

    @field_validator("precision", mode="before")
    @classmethod
    def _as_text(cls, value):
        return str(value)  # YAML reads 32 as a number


PositiveInts = list[Annotated[int, Field(gt=0)]]


class BeamSweepConfig(Block):
    where: ClassVar[str] = "beam_sweep"
    model: str | None = None  # a name from models; the stage refuses to run without one
    seed: int = 42  # which of the model's runs (one of seeds)
    split: str | None = None  # None: the first of data.eval_splits
    beams: PositiveInts = Field([1, 2, 4, 8, 12], min_length=1,
                                description="expected a list of positive integers, got {value!r}")
    # int | float: an alpha written 0 stays 0 in the sweep's results, as it was written
    alphas: list[Annotated[int | float, Field(ge=0)]] = Field(
        [0.0, 1.0], min_length=1, description="expected a list of numbers >= 0, got {value!r}")
    max_sentences: int | None = Field(500, gt=0)


# what each claim compares: analyze.roles maps every role to one of analyze.models
ANALYZE_ROLES = ("rnn", "gru", "lstm", "transformer", "cnn", "bottleneck", "attention", "sinusoidal", "learned",
                 "decoder_only", "encoder_decoder", "linformer", "sparse")


class AnalyzeConfig(Block):
    where: ClassVar[str] = "analyze"
    device: Literal["cpu", "cuda"] = "cpu"
    seed: int = 0
    width: int = Field(64, gt=0)
    param_widths: PositiveInts = Field([32, 64, 128], min_length=2,
                                       description="expected at least two positive integers, got {value!r}")
    lengths: PositiveInts = Field([8, 16, 32, 64, 128, 256, 512, 1024], min_length=2,
                                  description="expected at least two positive integers, got {value!r}")
    # T of the long sweep: transformer, linformer and sparse with a one-token target (claims 1, 9, 10)
    long_lengths: PositiveInts = Field([256, 512, 1024, 2048, 4096], min_length=2,
                                       description="expected at least two positive integers, got {value!r}")
    batch_size: int = Field(4, gt=0)
    vocab_size: int = Field(20, ge=8, description="must be at least 8 (4 special tokens and symbols), got {value!r}")
    repeats: int = Field(3, gt=0)
    # name -> model block; sizes may be written d, 2d, 4d, ...
    models: dict = Field(min_length=1, description="define the models to measure, e.g. analyze.models.transformer")
    gradient_models: list = []  # each checked below to be one of models
    probe_length: int = Field(32, gt=0)
    probe_rows: int = Field(8, gt=0)
    probe_steps: int = Field(100, gt=0)
    batch_tokens: int = Field(512, gt=0)
    lr: float = Field(0.003, gt=0)
    warmup_steps: int = Field(50, ge=0)
    clip: float = Field(1.0, gt=0)
    roles: dict = {}  # role of a claim (e.g. attention) -> a model of analyze.models
    span_threshold: float = Field(0.01, gt=0)
    synthetic_models: list = []
    tasks: list[Literal["copy", "reverse", "agreement"]] = ["copy", "reverse", "agreement"]
    train_length: int = Field(10, gt=0)
    min_length: int = Field(5, gt=0)
    synthetic_steps: int = Field(300, gt=0)
    synthetic_batch: int = Field(32, gt=0)
    test_examples: int = Field(20, gt=0)

    @model_validator(mode="after")
    def _every_claim_has_its_models(self):
        for key in ("gradient_models", "synthetic_models"):
            for name in getattr(self, key):
                choice(f"analyze.{key}", name, self.models)
        missing = sorted(set(ANALYZE_ROLES) - set(self.roles))
        if missing:
            raise ConfigError(f"analyze.roles: missing {', '.join(missing)}; name a model of analyze.models for each")
        for role, name in self.roles.items():
            choice(f"analyze.roles.{choice('analyze.roles', role, ANALYZE_ROLES)}", name, self.models)
        for role in ("bottleneck", "attention", "sinusoidal", "learned", "decoder_only", "encoder_decoder",
                     "linformer", "sparse"):
            if self.roles[role] not in self.synthetic_models:
                raise ConfigError(f"analyze.synthetic_models: add {self.roles[role]} (role {role} of claims 5-7, 10)")
        for role in ("rnn", "gru", "lstm", "transformer"):
            if self.roles[role] not in self.gradient_models:
                raise ConfigError(f"analyze.gradient_models: add {self.roles[role]} (role {role} of claim 4)")
        if not self.tasks:
            raise ConfigError("analyze.tasks: empty; name at least one of copy, reverse, agreement (claims 5-7 and 10 "
                              "are measured on them)")
        if not self.min_length <= self.train_length <= 100:
            raise ConfigError(f"analyze.train_length: must be in [min_length, 100] so tests reach 2L <= 200, "
                              f"got {self.train_length}")
        return self


class PublishedFigure(Block):
    """A model's score as its paper reports it: lowercased tokenized BLEU (multi-bleu.perl) on one test set."""
    where: ClassVar[str] = "compare.published"
    bleu: float = Field(ge=0, le=100)
    split: str = Field(min_length=1)  # one of data.eval_splits
    source: str = Field(min_length=1)  # who reports it, and where


class CompareConfig(Block):
    where: ClassVar[str] = "compare"
    baseline: str | None = None  # a name from models; null: the first model
    bootstrap_resamples: int = Field(1000, gt=0)
    bootstrap_seed: int = Field(12345, gt=0)  # sacreBLEU reads seed 0 as "no seed"
    rerun_margin: float = Field(1.6, ge=0)  # BLEU a rerun may move a model (verdict.decided, with fewer than 2 seeds)
    length_buckets: Annotated[PositiveInts, holds(lambda bounds: sorted(set(bounds)) == bounds)] = Field(
        [8, 12, 16, 20], min_length=1, description="expected increasing positive integers (the longest source, "
                                                   "in words, of each bucket), got {value!r}")
    examples: list[Annotated[int, Field(ge=0)]] = Field(
        [0, 100, 500], description="expected sentence indices (integers >= 0), got {value!r}")
    # outside systems scored beside the models: name -> {test split: its translation, a file under EXTERNAL_DIR}
    external: dict[str, dict[str, str]] = Field(
        {}, description="expected system name -> {{test split: hypothesis file}}, e.g. "
                        "{{joeynmt: {{test_2016_flickr: systems/joeynmt/test_2016_flickr.de}}}}, got {value!r}")
    # the papers' own figures, shown beside the models' BLEU lc tok: model name -> {bleu, split, source}
    published: dict[str, PublishedFigure] = {}


class TrialBudgetConfig(BudgetConfig):
    """The cost of one tuning trial, the same for every model and every trial."""
    where: ClassVar[str] = "tune.budget"


class KnobConfig(Block):
    """One hyperparameter's range: numbers from low to high (integers when both are), or a list of choices."""
    where: ClassVar[str] = "tune.space"
    low: int | float | None = Field(None, description="expected a number, got {value!r}")
    high: int | float | None = Field(None, description="expected a number, got {value!r}")
    log: bool = False  # sample on a log scale (learning rates)
    choices: list | None = Field(None, min_length=1)


# every family searches the same four knobs over the same ranges, so no family gets a better-informed search
SHARED_SPACE = {"lr": {"low": 1.0e-4, "high": 5.0e-3, "log": True}, "warmup_steps": {"low": 0, "high": 1000},
                "dropout": {"low": 0.0, "high": 0.5}, "label_smoothing": {"low": 0.0, "high": 0.3}}
TUNED_FAMILIES = ("rnn", "transformer", "decoder_only", "cnn", "hybrid")


class TuneConfig(Block):
    """Equal-budget tuning of every model on validation BLEU (nmtbench.training.tuning, docs/tuning.md)."""
    where: ClassVar[str] = "tune"
    trials: int = Field(0, ge=0)  # 0: no tuning, every model trains with params.yaml's values
    budget: TrialBudgetConfig = Field(default_factory=lambda: TrialBudgetConfig(kind="flops", value=5.5e12))
    sampler: Literal["tpe", "random"] = "tpe"
    seed: int = Field(0, ge=0)  # the sampler's seed and every trial's training seed
    storage: str | None = None  # an Optuna RDB URL; None: sqlite:///tuning/<model>/study.db
    heartbeat_seconds: int = Field(60, gt=0)
    retries: int = Field(2, ge=0)
    space: dict[str, dict[str, Any]] = Field(
        default_factory=lambda: dict.fromkeys(TUNED_FAMILIES, SHARED_SPACE), description=(
        "expected model family -> {{hyperparameter: range}}, e.g. {{transformer: {{lr: {{low: 1.0e-4, high: 3.0e-3, "
        "log: true}}}}}}"))

    @model_validator(mode="after")
    def _ranges_are_ranges(self):
        self.space = {family: {name: knob(f"tune.space.{family}.{name}", raw) for name, raw in (knobs or {}).items()}
                      for family, knobs in self.space.items()}
        if self.trials and self.budget.kind == "none":
            raise ConfigError("tune.budget.kind: none would let one trial run to max_epochs; give every trial a "
                              "budget, e.g. {kind: flops, value: 5.5e+12}")
        return self


def knob(where: str, raw: Any) -> KnobConfig:
    """A range of tune.space from `{low: 1.0e-4, high: 3.0e-3, log: true}` or `{choices: [...]}`, checked."""
    if isinstance(raw, KnobConfig):
        return raw
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected {{low: ..., high: ...}} or {{choices: [...]}}, got {raw!r}")
    found = KnobConfig(where, **raw)
    if found.choices is not None:
        if found.low is not None or found.high is not None or found.log:
            raise ConfigError(f"{where}: give either choices or low and high, not both")
        return found
    if found.low is None or found.high is None:
        raise ConfigError(f"{where}: needs low and high (or choices), e.g. {{low: 0.1, high: 0.3}}")
    if not found.low < found.high:
        raise ConfigError(f"{where}: low {found.low} is not below high {found.high}; swap or widen them")
    if found.log and found.low <= 0:
        raise ConfigError(f"{where}: a log scale needs low > 0, got {found.low}")
    return found


class WandbConfig(Block):
    where: ClassVar[str] = "wandb"
    project: str = "nmtbench"
    mode: Literal["offline", "online", "disabled"] = "offline"
    group: str = "default"


class ReportConfig(Block):
    where: ClassVar[str] = "report"
    attention_split: str | None = None  # None: the first of data.eval_splits
    attention_sentence: int = Field(0, ge=0)


class SlurmConfig(Block):
    """What `nmtbench launch` asks SLURM for, per job (sbatch flags through submitit)."""
    where: ClassVar[str] = "launch.slurm"
    partition: str | None = None  # None: the cluster's default partition
    time_min: int = Field(240, gt=0)  # the job's time limit in minutes
    account: str | None = None
    cpus_per_job: int | None = Field(None, gt=0)  # None: launch.threads_per_job
    mem_gb: float | None = Field(None, gt=0)  # None: the partition's default
    extra: dict[str, str | int] = Field(
        {}, description="expected sbatch flags without their dashes, e.g. {{qos: high, constraint: a100}}, "
                        "got {value!r}")


class LaunchConfig(Block):
    """How `nmtbench launch` runs the stages DVC finds out of date: where, how many at once, with which devices.
    No stage reads it, so changing it reruns nothing."""
    where: ClassVar[str] = "launch"
    # auto: slurm where sbatch is on PATH, else local (submitit's local executor), else process (the launcher's
    # own processes, where submitit is not installed)
    executor: Literal["auto", "local", "slurm", "process"] = "auto"
    jobs: int = Field(2, gt=0)  # stages running at once
    threads_per_job: int | None = Field(None, gt=0)  # None: this machine's cores split between the jobs
    gpus_per_job: int = Field(0, ge=0)
    jobs_per_gpu: int = Field(1, gt=0)  # small models packed on one GPU
    slurm: SlurmConfig = Field(default_factory=SlurmConfig)

    @model_validator(mode="after")
    def _packing_needs_one_gpu(self):
        if self.jobs_per_gpu > 1 and self.gpus_per_job > 1:
            raise ConfigError(f"launch.jobs_per_gpu: {self.jobs_per_gpu} jobs share a GPU only with "
                              f"gpus_per_job 1, got {self.gpus_per_job}; set gpus_per_job: 1 or jobs_per_gpu: 1")
        return self


class Params(Block):
    """The whole of params.yaml; the blocks in the order `params: unknown block(s)` lists them."""
    data: DataConfig = Field(default_factory=DataConfig)
    tokenize: TokenizeConfig = Field(default_factory=TokenizeConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    evaluate: DecodeConfig = Field(default_factory=DecodeConfig)
    beam_sweep: BeamSweepConfig = Field(default_factory=BeamSweepConfig)
    wandb: WandbConfig = Field(default_factory=WandbConfig)
    compare: CompareConfig = Field(default_factory=CompareConfig)
    report: ReportConfig = Field(default_factory=ReportConfig)
    tune: TuneConfig = Field(default_factory=TuneConfig)
    # name -> raw block; models.registry validates and builds each
    models: dict = Field(min_length=1, description="define at least one model block, e.g. models.transformer")
    # name -> the train keys of its block's own `train:` recipe, taken out of the block (for_model applies them)
    model_train: dict = Field(default_factory=dict, exclude=True)
    # the grid is models x seeds; numpy, which each seeds, refuses one outside [0, 2**32 - 1], but only in training
    seeds: Annotated[list[Annotated[int, Field(ge=0, le=2**32 - 1)]], holds(distinct)] = Field(
        [42], min_length=1, description="expected a list of distinct integers from 0 to 2**32 - 1 (numpy's range of "
                                        "seeds), e.g. [42] or [1, 2, 3], got {value!r}")
    analyze: AnalyzeConfig | None = None  # only the analyze stage reads it
    launch: LaunchConfig = Field(default_factory=LaunchConfig)  # nmtbench launch; no stage reads it

    @model_validator(mode="before")
    @classmethod
    def _own_recipes_out_of_the_blocks(cls, raw):
        """A model block's `train:` is that model's recipe, not an architecture key: keep it beside the block."""
        if isinstance(raw, dict) and "model_train" in raw:
            raise ConfigError("params: unknown block model_train; give a model its own train keys under its block, "
                              "e.g. models.<name>.train.lr")
        if isinstance(raw, dict) and isinstance(raw.get("models"), dict):
            blocks = {name: dict(block) if isinstance(block, dict) else block for name, block in raw["models"].items()}
            recipes = {name: block.pop("train") for name, block in blocks.items()
                       if isinstance(block, dict) and "train" in block}
            raw = {**raw, "models": blocks, "model_train": recipes}
        return raw

    @model_validator(mode="after")
    def _names_refer_to_the_grid(self):
        for name in self.model_train:
            self.for_model(name)  # a bad key or value of a recipe fails here, before any stage runs
        for where, model in (("beam_sweep.model", self.beam_sweep.model), ("compare.baseline", self.compare.baseline)):
            if model not in (None, *self.models):
                raise ConfigError(f"{where}: {model!r} is not a model of params.yaml; "
                                  f"choose one of {', '.join(self.models)}")
        if self.tune.trials and self.train.val_bleu_sentences == 0:
            raise ConfigError("tune.trials: trials are scored by val BLEU, which train.val_bleu_sentences 0 turns "
                              "off; set it above 0 (or null for the whole val split)")
        if self.beam_sweep.seed not in self.seeds:
            raise ConfigError(f"beam_sweep.seed: {self.beam_sweep.seed} is not in seeds {self.seeds}; "
                              "choose one of them")
        for name, figure in self.compare.published.items():
            choice("compare.published", name, self.models)
            choice(f"compare.published.{name}.split", figure.split, self.data.eval_splits)
        for name, files in self.compare.external.items():
            where = f"compare.external.{name}"
            if name in self.models:
                raise ConfigError(f"{where}: {name!r} is also a model of params.yaml; give the outside system "
                                  "another name")
            if list(files) != self.data.eval_splits:
                raise ConfigError(f"{where}: gives {', '.join(files) or 'no test sets'}; it needs one hypothesis "
                                  f"file per test set the models are scored on, in order: "
                                  f"{', '.join(self.data.eval_splits)} (data.eval_splits)")
            for split, path in files.items():
                if Path(path).parts[:1] != (EXTERNAL_DIR,) or ".." in Path(path).parts:
                    raise ConfigError(f"{where}.{split}: {path} is not under {EXTERNAL_DIR}/, the folder the compare "
                                      f"stage depends on; move the file there")
        for where, split in (("beam_sweep.split", self.beam_sweep.split),
                             ("report.attention_split", self.report.attention_split)):
            if split is not None:
                choice(where, split, self.data.splits[1:])
        return self

    def for_model(self, name: str) -> Params:
        """These params as model `name` trains: its block's `train:` keys over the shared train block."""
        recipe = self.model_train.get(name)
        if not recipe:
            return self
        if not isinstance(recipe, dict):
            raise ConfigError(f"models.{name}.train: expected train keys, e.g. {{lr: 0.005}}, got {recipe!r:.60}")
        train = from_dict(TrainConfig, {**self.train.model_dump(exclude_unset=True), **recipe}, f"models.{name}.train")
        return self.model_copy(update={"train": train})

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
    if isinstance(raw.get("train"), dict) and "seed" in raw["train"]:
        raise ConfigError("train.seed: replaced by the top-level list `seeds` (e.g. seeds: [42]); move it there")
    return Params(**raw)


def load_params(path: str | Path = "params.yaml") -> Params:
    return parse_params(read_yaml(path) or {})
