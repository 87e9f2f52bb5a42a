"""The tokenize stage's dataset read back with pyarrow alone, for every stage that reads it but the data stages.

The stage writes data/tokenized/dataset with Hugging Face `datasets` (save_to_disk: a dataset_dict.json naming the
splits, and per split a state.json naming its Arrow stream files). `datasets`, with pandas under it, takes seconds
to import, paid again by every process that would read through it: every training (batching.PairDataset maps the
train and val splits from here), every evaluate, compare and beam_sweep. So they read the same files here, through
pyarrow, which `datasets` stores them with; tokenizer.load_tokenized, through `datasets`, is the notebook's.
"""
from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path

import pyarrow as pa

from nmtbench.data.sources import DataError


class Split:
    """One split's rows: split["src"] is a column as a list, split[i] the i-th row as a dict."""

    def __init__(self, table: pa.Table):
        self.table = table
        self.columns: dict[str, list] = {}

    def __len__(self) -> int:
        return self.table.num_rows

    def __getitem__(self, key: str | int):
        if isinstance(key, int):
            return {name: self[name][key] for name in self.table.column_names}
        if key not in self.columns:
            self.columns[key] = self.table.column(key).to_pylist()
        return self.columns[key]


class TokenizedSplits(Mapping):
    """The splits of a tokenize stage's dataset by name, each read from its files when first asked for."""

    def __init__(self, tokenized_dir: Path = Path("data/tokenized")):
        self.folder = Path(tokenized_dir) / "dataset"
        index = self.folder / "dataset_dict.json"
        if not index.is_file():
            raise DataError(f"no tokenized dataset in {tokenized_dir}; run the tokenize stage first: "
                            "dvc repro tokenize")
        self.names: list[str] = json.loads(index.read_text())["splits"]
        self.read: dict[str, Split] = {}

    def __getitem__(self, name: str) -> Split:
        if name not in self.names:
            raise KeyError(name)
        if name not in self.read:
            self.read[name] = Split(read_split(self.folder / name))
        return self.read[name]

    def __contains__(self, name: object) -> bool:  # Mapping's would read the split
        return name in self.names

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)


def read_split(folder: Path) -> pa.Table:
    """A split's Arrow stream files, in the order its state.json lists them, as one table."""
    try:
        files = [folder / entry["filename"] for entry in json.loads((folder / "state.json").read_text())["_data_files"]]
        tables = [pa.ipc.open_stream(pa.memory_map(str(file))).read_all() for file in files]
    except (OSError, KeyError, ValueError, pa.ArrowInvalid) as e:
        raise DataError(f"{folder}: the tokenized split cannot be read ({e}); rerun the tokenize stage: "
                        "dvc repro tokenize --force") from None
    return pa.concat_tables(tables)
