"""`nmtbench translate`: a trained model folder's translations of a file or of standard input, line by line
as it arrives."""
from __future__ import annotations

import codecs
import os
import select
import sys
from collections.abc import Callable
from pathlib import Path

from nmtbench.config import ConfigError, DecodeConfig, load_params


def _translate(args):
    from nmtbench.decoding.translator import Translator
    from nmtbench.loading import resolve_device
    from nmtbench.progress import progress_bar

    for option, value, smallest in (("--beam", args.beam, 1), ("--nbest", args.nbest, 1),
                                    ("--batch-tokens", args.batch_tokens, 1), ("--alpha", args.alpha, 0)):
        if value is not None and value < smallest:
            raise ConfigError(f"{option}: must be at least {smallest}, got {value}")
    overrides = {key: value for key, value in (("beam", args.beam), ("alpha", args.alpha),
                                               ("batch_tokens", args.batch_tokens), ("device", args.device))
                 if value is not None}
    defaults = load_params(args.params).evaluate if Path(args.params).is_file() else DecodeConfig()
    cfg = defaults.model_copy(update=overrides)
    if args.nbest > cfg.beam:
        raise ConfigError(f"--nbest: {args.nbest} is more than the beam size {cfg.beam}; raise --beam to at least "
                          f"{args.nbest}")
    resolve_device(cfg.device, "--device" if args.device else "evaluate.device")  # before loading anything
    translator = Translator.from_model_dir(Path(args.model_dir), cfg)
    if args.input == "-":  # line by line as it comes: each chunk's translations are written before the next is read
        done = 0
        for chunk in stdin_chunks(cfg.batch_size):
            say_too_long(write_translations(translator, chunk, args.nbest, done), translator.longest)
            done += len(chunk)
        return
    sentences = read_input(args.input)
    with progress_bar(len(sentences), "translating", "sent") as progress:
        too_long = write_translations(translator, sentences, args.nbest, 0, progress)
    say_too_long(too_long, translator.longest)


def write_translations(translator, sentences: list[str], nbest: int, first: int, progress=None) -> dict[int, int]:
    """The translations of sentences, lines first + 1 on of the input, to standard output, flushed; returns the
    index and length of each line too long for the model's positions, which costs that line (left empty), not the
    others."""
    too_long: dict[int, int] = {}
    found = translator.translate(sentences, nbest, progress, too_long)
    for i, hyps in enumerate(found, start=first):
        for text, score in hyps:
            print(text if nbest == 1 else f"{i} ||| {text} ||| {score:.4f}")
    sys.stdout.flush()
    return {first + index: length for index, length in too_long.items()}


def say_too_long(too_long: dict[int, int], longest: int | None) -> None:
    for index, length in too_long.items():
        print(f"nmtbench translate: line {index + 1} has {length:,} tokens, {length - longest:,} more than the "
              f"{longest:,} this model translates (max_positions of its model block); its output line is left "
              "empty", file=sys.stderr)


def read_input(name: str) -> list[str]:
    """The lines of a UTF-8 text file, refusing anything else in one line (standard input: stdin_chunks)."""
    path = Path(name)
    if path.is_dir():
        raise ConfigError(f"{path} is a folder; pass a text file with one sentence per line, or - for standard input")
    if not path.is_file():
        raise ConfigError(f"{path}: no such input file; pass a text file with one sentence per line")
    lines = path.read_bytes().removeprefix(codecs.BOM_UTF8).split(b"\n")  # a byte-order mark is no sentence's text
    if lines[-1] == b"":  # the newline that ends the last line starts no new one
        lines.pop()
    return [text_line(line, number, str(path)) for number, line in enumerate(lines, start=1)]


def text_line(line: bytes, number: int, label: str) -> str:
    """One input line as text, or a one-line refusal naming the line: not UTF-8, or binary."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{label}, line {number}: not UTF-8 text ({e.reason} at byte {e.start}); convert the "
                          "input to UTF-8, e.g. iconv -f latin1 -t utf-8") from None
    if "\0" in text:
        raise ConfigError(f"{label}, line {number}: holds a NUL byte, so it is binary, not text; "
                          "pass a text file with one sentence per line")
    return text.removesuffix("\r")


def stdin_chunks(most: int):
    """Standard input's lines, checked as a file's are, in chunks of the lines that have arrived, `most` at the
    most: a line typed at a terminal is translated once it ends, a piped file in batches. Read from the descriptor,
    past Python's buffer, so that select tells whether more has arrived; a stream without one (a test's) is read
    whole before the first chunk's end is decided."""
    stream = sys.stdin.buffer
    try:
        fd = stream.fileno()
    except (OSError, ValueError):  # io.UnsupportedOperation is both
        fd = None

    def arrived() -> bool:
        return fd is None or bool(select.select([fd], [], [], 0)[0])

    pending, number, chunk = b"", 0, []
    while True:
        if b"\n" not in pending:
            block = os.read(fd, 1 << 16) if fd is not None else stream.read(1 << 16)
            if block:
                pending += block
                continue
            if not pending:  # the end of the input, its last line ended by a newline (or empty)
                break
            pending += b"\n"  # a last line without a newline ending it
        line, pending = pending.split(b"\n", 1)
        number += 1
        chunk.append(text_line(line.removeprefix(codecs.BOM_UTF8) if number == 1 else line, number, "standard input"))
        if len(chunk) >= most or (b"\n" not in pending and not arrived()):
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def add_commands(command: Callable) -> None:
    """translate, made by command(name, handler, help text)."""
    translate = command("translate", _translate, "translate a file or standard input with a trained model")
    translate.add_argument("model_dir", help="a trained model folder, e.g. models/transformer/seed42")
    translate.add_argument("input", nargs="?", default="-", help="one sentence per line (default: standard input)")
    translate.add_argument("--beam", type=int, help="beam size (default: evaluate.beam of params.yaml)")
    translate.add_argument("--alpha", type=float, help="length penalty strength (default: evaluate.alpha)")
    translate.add_argument("--nbest", type=int, default=1, help="print the n best as 'line ||| text ||| score'")
    translate.add_argument("--batch-tokens", type=int,
                           help="at most this many padded source tokens per batch (default: evaluate.batch_tokens)")
    translate.add_argument("--device", choices=("auto", "cpu", "cuda"),
                           help="where to decode; auto: cuda when present (default: evaluate.device)")
