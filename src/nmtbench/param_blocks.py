"""The framework every params block is built on: a pydantic model whose errors are one line naming the key and the fix.

Each params block is a Block: its annotations and Field constraints (gt, ge, Literal choices) are the checks, and
`refusal` words pydantic's first error as the project's line, `<key>: <what is wrong>; <the fix>`. Where a generic
line would not say enough, a Field's description is the line (formatted with the value given). Checks that read
several keys at once are the model validators of their block and raise ConfigError themselves. The stages' blocks
are in nmtbench.config; a model family's config (nmtbench.models) is a Block too.
"""
from __future__ import annotations

import types
from typing import Any, ClassVar, Literal, Union, get_args, get_origin

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError, field_validator


class ConfigError(ValueError):
    """A bad value in params.yaml; the message names the key and what would be valid."""


def choice(where: str, value: Any, valid) -> Any:
    """Return value if it is one of valid, else raise naming every valid choice (for choices known only at run
    time, such as the models params.yaml defines)."""
    valid = tuple(valid)
    if value not in valid:
        raise ConfigError(f"{where}: {value!r} is not valid; choose one of {', '.join(map(str, valid))}")
    return value


def holds(check) -> AfterValidator:
    """A check across a value's items (distinct, increasing); its field's description words the refusal."""
    def validate(value):
        if not check(value):
            raise ValueError(check.__name__)
        return value
    return AfterValidator(validate)


def distinct(values: list) -> bool:
    return len(set(values)) == len(values)


class Block(BaseModel):
    """One block of params.yaml. Unknown keys are refused, and nothing is converted but int to float: YAML reads
    2.0e15 as text, which must not become a number unseen."""
    model_config = ConfigDict(extra="forbid", strict=True)
    where: ClassVar[str] = ""  # the block's key in params.yaml, which every error names

    def __init__(self, where: str | None = None, /, **values):
        """Validate values; where overrides the class's key for blocks named at run time (models.<name>). pydantic
        calls this for a nested block too, so its errors arrive here already worded."""
        try:
            super().__init__(**values)
        except ValidationError as error:
            raise ConfigError(refusal(error, type(self), values, self.where if where is None else where)) from None

    def validate(self, where: str) -> None:
        """Checks across keys, which a model family's config adds (it replaces pydantic's deprecated validate)."""

    @field_validator("*", mode="before")
    @classmethod
    def _empty_block(cls, value, info):
        """`train:` with nothing under it is YAML's null: an empty block, so the block's defaults."""
        annotation = cls.model_fields[info.field_name].annotation
        return {} if value is None and (annotation is dict or block_of(annotation)) else value


def block_of(annotation) -> type[Block] | None:
    """The Block a field holds (SourceConfig, AnalyzeConfig of `AnalyzeConfig | None`, PublishedFigure of
    `dict[str, PublishedFigure]`), if any."""
    return next((kind for kind in (annotation, *get_args(annotation))
                 if isinstance(kind, type) and issubclass(kind, Block)), None)


def refusal(error: ValidationError, cls: type[Block], values: dict, where: str) -> str:
    """pydantic's first error as one line: the dotted key, what is wrong, and what would be valid."""
    first = error.errors()[0]
    kind, given, loc = first["type"], first["input"], first["loc"]
    name, path = (str(loc[0]) if loc else ""), ".".join(map(str, (where, *loc) if where else loc))
    if kind == "value_error" and isinstance(first["ctx"]["error"], ConfigError):  # a validator's own line, or a
        return relocated(str(first["ctx"]["error"]), cls, name, path)            # nested block's error
    if kind == "extra_forbidden":
        noun = "key" if where else "block"  # the top level of params.yaml holds blocks
        unknown = sorted(str(e["loc"][0]) for e in error.errors() if e["type"] == kind)
        valid = [key for key, field in cls.model_fields.items() if not field.exclude]  # not one refused if given
        return f"{where or 'params'}: unknown {noun}(s) {', '.join(unknown)}; valid {noun}s are {', '.join(valid)}"
    field, key, value = cls.model_fields[name], f"{where}.{name}" if where else name, values.get(name)
    wrong_type = kind.endswith("_type") and kind != "model_type" and len(first["loc"]) == 1
    # a description words every error of its key but a wrong type, which the annotation words; params.yaml's own
    # seeds and models are described whole
    if field.description and not (wrong_type and where):
        return f"{key}: {field.description.format(value=value)}"
    if kind == "missing":
        return f"{key}: missing; add `{name}: <{type_names(field.annotation)}>` to the block"
    if kind == "model_type":  # the block itself, or an entry of a dict of blocks (compare.published.<model>)
        return f"{path}: expected a block of `key: value` lines, got {given!r}; indent its keys under `{loc[-1]}:`"
    if kind == "literal_error":
        return f"{key}: {given!r} is not valid; choose one of {', '.join(map(str, literal_values(field.annotation)))}"
    if wrong_type:
        return f"{key}: expected {type_names(field.annotation)}, got {value!r}{float_hint(value, field.annotation)}"
    bounds = {op: getattr(m, op) for m in field.metadata for op in ("gt", "ge", "lt", "le") if hasattr(m, op)}
    if kind.endswith("_type"):  # an item of a list or dict: name the item
        return f"{path}: expected {kind.removesuffix('_type')}, got {given!r}"
    if kind.endswith("too_short"):  # an empty split name, an empty list of choices
        noun = "character" if kind.startswith("string") else "item"
        return f"{key}: needs at least {first['ctx']['min_length']} {noun}(s), got {given!r}"
    if not bounds:
        return f"{key}: {first['msg']}"  # no field here words it otherwise; pydantic's own words
    given = float(given) if float in (field.annotation, *get_args(field.annotation)) else given  # 1 reads as 1.0
    if len(bounds) == 2:  # an interval such as (0, 1]
        low = f"({bounds['gt']}" if "gt" in bounds else f"[{bounds['ge']}"
        high = f"{bounds['lt']})" if "lt" in bounds else f"{bounds['le']}]"
        return f"{key}: must be in {low}, {high}, got {given!r}"
    ((op, bound),) = bounds.items()
    return f"{key}: must be {'>' if op == 'gt' else '>='} {bound}, got {given!r}"


def float_hint(value: Any, annotation) -> str:
    """How to write a number that PyYAML read as a string: YAML 1.1's floats need a dot and a signed exponent, so
    1e-3 is the text '1e-3' (1.0e-3 is the number); '' for any other value."""
    if not isinstance(value, str) or float not in (annotation, *get_args(annotation)):
        return ""
    try:
        float(value)
    except ValueError:
        return ""
    mantissa, _, exponent = value.lower().partition("e")
    written = (mantissa if "." in mantissa else f"{mantissa}.0") + (
        f"e{exponent if exponent[:1] in '+-' else '+' + exponent}" if exponent else "")
    return f" (YAML reads {value} as text, not a number); write {written}"


def relocated(line: str, cls: type[Block], name: str, path: str) -> str:
    """A nested block words its errors under the key its class is written for (train.budget); name the key it
    was given under instead (models.<name>.train.budget, compare.published.<model>)."""
    nested = block_of(cls.model_fields[name].annotation) if name in cls.model_fields else None
    if nested is not None and nested.where and line.startswith((f"{nested.where}.", f"{nested.where}:")):
        return path + line[len(nested.where):]
    return line


def literal_values(annotation) -> tuple:
    if get_origin(annotation) is Literal:
        return get_args(annotation)
    return next((found for arg in get_args(annotation) if (found := literal_values(arg))), ())


def type_names(annotation) -> str:
    """float | None -> `float or null`, list[int] -> `list`."""
    kinds = get_args(annotation) if get_origin(annotation) in (Union, types.UnionType) else (annotation,)
    return " or ".join("null" if kind is type(None) else (get_origin(kind) or kind).__name__ for kind in kinds)


def from_dict(cls: type[Block], values: dict | None, where: str):
    """Build cls from a params block whose key is known only at run time (models.<name>)."""
    return cls(where, **(values or {}))
