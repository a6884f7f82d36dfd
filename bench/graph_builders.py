"""All graph-builder benchmarks of the foundation issue in one run, each against its anchor.

    python -m bench.graph_builders            # atomic, mesoscale, continuum, store
    python -m bench.graph_builders atomic store

Run bench scripts as modules from the repository root (see bench/README.md): this file's name is the
package's name, so a script run as ``python bench/<x>.py`` would import it instead of the package.

Each part prints its own medians and ratios (ours vs ASE / raw vesin, scipy Voronoi, PyG FaceToEdge,
torch.save); see the per-part scripts for options.
"""

from __future__ import annotations

import importlib
import sys
from typing import Sequence

if __name__ == "graph_builders":
    raise ImportError(
        "bench/graph_builders.py was imported instead of the graph_builders package: run bench "
        "scripts as modules from the repository root, e.g. `python -m bench.training`"
    )

PARTS = ("atomic", "mesoscale", "continuum", "store")


def main(argv: Sequence[str] | None = None) -> int:
    chosen = list(argv if argv is not None else sys.argv[1:]) or list(PARTS)
    unknown = [p for p in chosen if p not in PARTS]
    if unknown:
        print(f"unknown part(s) {unknown}; choose from {PARTS}", file=sys.stderr)
        return 2
    status = 0
    for part in chosen:
        print(f"\n===== graph builders: {part} =====", flush=True)
        status |= importlib.import_module(f"bench.graph_builders_{part}").main([])
    return status


if __name__ == "__main__":
    raise SystemExit(main())
