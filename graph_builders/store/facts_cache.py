"""The facts of any dataset, computed at most once: stored in the file by the writer, else computed
by one scan and cached beside the dataset (``DATASET.facts.json``), keyed by its content.

The key (:func:`fingerprint`) is every file of the dataset with its size, and the sha256 of its
ADIOS2 metadata files (which hold every variable's shape): a dataset replaced, truncated or
extended gets new facts. Whatever their origin, facts are checked against the file before use
(:func:`check_facts`: graphs per split, nodes and edges against the variables' shapes), so facts
that do not describe the data are named before a trial trains on them, never used.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from graph_builders.schema import HeadRegistry
from graph_builders.store.errors import StoreError
from graph_builders.store.facts import DatasetFacts, FactsBuilder

SIDECAR_SUFFIX = ".facts.json"
SCAN_BLOCK = 1024  # graphs per read while scanning a dataset without facts
_METADATA_FILES = ("md.idx", "md.0", "mmd.0")


def fingerprint(path: Path) -> str:
    """A digest of the dataset directory's files (name and size) and its metadata files' bytes."""
    digest = hashlib.sha256()
    for entry in sorted(os.scandir(path), key=lambda e: e.name):
        if entry.is_file():
            digest.update(f"{entry.name}:{entry.stat().st_size};".encode())
            if entry.name in _METADATA_FILES:
                with open(entry.path, "rb") as fh:
                    digest.update(fh.read())
    return digest.hexdigest()


def sidecar_path(path: Path) -> Path:
    return path.with_name(path.name + SIDECAR_SUFFIX)


def dataset_facts(store, progress: bool = False) -> DatasetFacts:
    """The facts of an open :class:`~graph_builders.store.GraphStore`: the stored ones, else the
    cached ones whose key matches, else one scan (cached when the directory is writable); checked
    against the file (:func:`check_facts`). A sharded dataset merges its shards' facts, each
    checked against its shard."""
    if getattr(store, "sharded", False):
        return store.facts
    facts = store.facts
    if facts is None:
        facts = _cached(store.path)
    if facts is None:
        facts = scan_facts(store, progress)
        _cache(store.path, facts)
    check_facts(store, facts)
    return facts


def scan_facts(store, progress: bool = False) -> DatasetFacts:
    """Compute the facts by reading every graph once, block by block."""
    from tqdm import tqdm

    builder = FactsBuilder(store.heads)
    total = sum(store.num_graphs(s) for s in store.split_names)
    with tqdm(total=total, disable=not progress, desc=f"dataset facts of {store.path.name}", unit="graph") as bar:
        for split in store.split_names:
            n = store.num_graphs(split)
            builder.open_split(split)  # an empty split has facts too
            for start in range(0, n, SCAN_BLOCK):
                for graph in store.read_range(split, start, min(n, start + SCAN_BLOCK)):
                    builder.add(split, graph)
                bar.update(min(n, start + SCAN_BLOCK) - start)
            builder.splits[split].nbytes = store.stored_bytes(split) if n else 0  # the split's, not per graph
    return builder.finish()


def check_facts(store, facts: DatasetFacts) -> None:
    """StoreError naming the file when ``facts`` do not describe ``store``: other splits, other
    graph counts, other head registry, or node and edge totals that are not the variables' shapes."""
    where = store.path
    if facts.heads_json and HeadRegistry.from_json(facts.heads_json) != store.heads:
        raise StoreError(f"{where}: its dataset facts are of another head registry (the file was replaced?)")
    for split in store.split_names:
        n = store.num_graphs(split)
        split_facts = facts.splits.get(split)
        if split_facts is None or split_facts.ndata != n:
            got = None if split_facts is None else split_facts.ndata
            raise StoreError(f"{where}: its dataset facts count {got} graphs in {split!r}, the file holds {n} "
                             "(the file was edited, truncated or replaced after the facts were computed)")
        if n and "pos" in store.keys(split):
            nodes, edges = store.total_rows(split, "pos"), store.total_rows(split, "edge_index")
            if (nodes, edges) != (split_facts.nodes, split_facts.edges):
                raise StoreError(f"{where}: its dataset facts count {split_facts.nodes} nodes and "
                                 f"{split_facts.edges} edges in {split!r}, the file holds {nodes} and {edges}")


def _cached(path: Path) -> DatasetFacts | None:
    side = sidecar_path(path)
    try:
        record = json.loads(side.read_text())
        if record.get("fingerprint") != fingerprint(path):
            return None
        return DatasetFacts.from_json(record["facts"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _cache(path: Path, facts: DatasetFacts) -> None:
    """Write the sidecar atomically; a read-only place just goes without (the scan is redone)."""
    side = sidecar_path(path)
    tmp = side.with_name(f"{side.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(json.dumps({"fingerprint": fingerprint(path), "facts": facts.to_json()}))
        os.replace(tmp, side)
    except OSError:
        tmp.unlink(missing_ok=True)
