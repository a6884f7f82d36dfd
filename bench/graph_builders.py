"""All graph-builder benchmarks of the foundation issue in one run, each against its anchor.

    python bench/graph_builders.py            # atomic, mesoscale, continuum, store
    python bench/graph_builders.py atomic store

Each part prints its own medians and ratios (ours vs ASE / raw vesin, scipy Voronoi, PyG FaceToEdge,
torch.save); see the per-part scripts for options.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Sequence

PARTS = ("atomic", "mesoscale", "continuum", "store")


def main(argv: Sequence[str] | None = None) -> int:
    chosen = list(argv if argv is not None else sys.argv[1:]) or list(PARTS)
    unknown = [p for p in chosen if p not in PARTS]
    if unknown:
        print(f"unknown part(s) {unknown}; choose from {PARTS}", file=sys.stderr)
        return 2
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    status = 0
    for part in chosen:
        print(f"\n===== graph builders: {part} =====", flush=True)
        status |= importlib.import_module(f"graph_builders_{part}").main([])
    return status


if __name__ == "__main__":
    raise SystemExit(main())
