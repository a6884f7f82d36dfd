"""Training throughput of HydraModel per mpnn_type against HydraGNN's figures (CPU, one thread).

Configuration of ANCHORS.md: 64-atom periodic FCC alloys (2-3 of Cu/Ni/Pd/Pt/Au/Ag/Al, Vegard lattice
constant, rattled) with every periodic image within 5 Å (~2,590 directed edges), batch 32, 3 conv
layers, hidden 64 and 128, graph head 2x64 shared + 2x64, one energy head, edge feature = length.
One epoch = PyG DataLoader collation + forward + backward + Adam step over all graphs; graphs/s is
the median over repeats. Each (type, hidden) runs in its own process so its peak RSS is its own.

In the same run, where PyG ships HydraGNN's layer (GIN: GINConv, PNA: PNAConv, CGCNN: CGConv,
SchNet: InteractionBlock) a reference model with the same embedding, trunk and heads but PyG's layer
is timed too ("pyg-ref"), so the ratio holds even on a loaded machine. HydraGNN's own figures
(measured on this machine type, quiet) are printed as "hydragnn".

    .venv/bin/python bench/model_throughput.py [--types GIN,SchNet] [--hidden 64,128] [--graphs 96]
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

HYDRAGNN_GRAPHS_PER_S = {
    64: {"GIN": 1208.0, "SchNet": 121.0, "EGNN": 86.0, "PNA": 64.0, "PaiNN": 27.0},
    128: {"GIN": 281.0, "SchNet": 25.0, "PNA": 15.0, "PaiNN": 11.0},
}
ALL_TYPES = ("GIN", "PNA", "GAT", "CGCNN", "SchNet", "EGNN", "PaiNN")
LATTICE = {"Cu": 3.61, "Ni": 3.52, "Pd": 3.89, "Pt": 3.92, "Au": 4.08, "Ag": 4.09, "Al": 4.05}
RADIUS = 5.0


@dataclass
class Measurement:
    """One (type, hidden, implementation) timing."""

    mpnn_type: str
    hidden: int
    implementation: str
    graphs_per_s: float
    parameters: int
    peak_rss_gb: float
    mean_edges: float


def brute_force_graph(atoms: object, radius: float) -> object:
    """Schema graph of an ASE Atoms object: all periodic image pairs within ``radius``."""
    import torch
    from torch_geometric.data import Data

    pos = torch.tensor(atoms.positions, dtype=torch.float64)
    cell = torch.tensor(atoms.cell.array, dtype=torch.float64)
    widths = 1.0 / torch.linalg.inv(cell).norm(dim=0)
    reps = [int(math.ceil(radius / float(w))) for w in widths]
    axes = [torch.arange(-r, r + 1, dtype=torch.float64) for r in reps]
    shifts = torch.stack(torch.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
    vec = pos[None, :, None, :] + (shifts @ cell)[None, None] - pos[:, None, None, :]
    dist = vec.norm(dim=-1)
    i, j, s = ((dist < radius) & (dist > 1e-8)).nonzero(as_tuple=True)
    z = torch.tensor(atoms.numbers, dtype=torch.long)
    return Data(
        pos=pos.float(), x=z.float().unsqueeze(-1), z=z, edge_index=torch.stack([j, i]),
        edge_attr=dist[i, j, s].float().unsqueeze(-1), cell=cell.float().unsqueeze(0),
        pbc=torch.ones(1, 3, dtype=torch.bool), edge_shift=shifts[s].float(),
    )


def alloy_graphs(count: int, seed: int = 0) -> list:
    """``count`` random 64-atom FCC alloy graphs (primitive cell repeated 4x4x4) at 5 Å."""
    import numpy as np
    import torch
    from ase.build import bulk

    try:  # the project's builder when it exists; the brute-force one otherwise
        from graph_builders.atomic import atoms_to_graph  # type: ignore[import-not-found]

        def build(atoms: object) -> object:
            return atoms_to_graph(atoms, cutoff=RADIUS)
    except ImportError:

        def build(atoms: object) -> object:
            return brute_force_graph(atoms, RADIUS)

    rng = np.random.default_rng(seed)
    names = list(LATTICE)
    graphs = []
    for _ in range(count):
        elements = list(rng.choice(names, size=int(rng.integers(2, 4)), replace=False))
        symbols = list(rng.choice(elements, size=64))
        a = float(np.mean([LATTICE[s] for s in symbols]))
        atoms = bulk("Cu", "fcc", a=a).repeat((4, 4, 4))
        atoms.set_chemical_symbols(symbols)
        atoms.rattle(0.05, seed=int(rng.integers(1 << 30)))
        graph = build(atoms)
        graph.y_energy = torch.randn(1, 1, dtype=torch.float32)
        graphs.append(graph)
    return graphs


def _reference_layers(model: object, mpnn_type: str, hidden: int, histogram: tuple[int, ...]) -> bool:
    """Swap the model's layers for PyG's implementation of the same layer; False when PyG has none."""
    import torch
    from torch import nn
    from torch_geometric.nn import CGConv, GINConv, PNAConv
    from torch_geometric.nn.models.schnet import InteractionBlock

    from hydragnn_ensemble.model.layers.base import ConvLayer, LayerConfig

    class PyGLayer(ConvLayer):
        needs_geometry = mpnn_type in ("CGCNN", "SchNet")

        def __init__(self, config: LayerConfig) -> None:
            super().__init__(config)
            if mpnn_type == "GIN":
                self.conv = GINConv(nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, hidden)),
                                    train_eps=True)
            elif mpnn_type == "PNA":
                self.conv = PNAConv(hidden, hidden, ["mean", "min", "max", "std"],
                                    ["identity", "amplification", "attenuation", "linear"],
                                    torch.tensor(histogram), edge_dim=1, towers=1, divide_input=False)
            elif mpnn_type == "CGCNN":
                self.conv = CGConv(hidden, dim=config.num_gaussians + 1, aggr="add")
            else:
                self.conv = InteractionBlock(hidden, config.num_gaussians, hidden, config.radius)

        def forward(self, h, edges, geom, vec=None):  # type: ignore[no-untyped-def]
            edge_index = edges.index
            if mpnn_type == "GIN":
                return self.conv(h, edge_index), None
            if mpnn_type == "PNA":
                return self.conv(h, edge_index, geom.edge_attr), None
            if mpnn_type == "CGCNN":
                return self.conv(h, edge_index, torch.cat([geom.rbf, geom.edge_attr], -1)) - h, None
            return self.conv(h, edge_index, geom.distance, geom.rbf), None

    if mpnn_type not in ("GIN", "PNA", "CGCNN", "SchNet"):
        return False
    for k, layer in enumerate(model.layers):
        model.layers[k] = PyGLayer(layer.config)
    return True


def measure(mpnn_type: str, hidden: int, implementation: str, count: int, repeats: int) -> Measurement | None:
    """Median graphs/s of training epochs for one configuration (None when no PyG reference)."""
    import torch
    from torch_geometric.loader import DataLoader

    from graph_builders.schema import HeadRegistry, HeadSpec
    from hydragnn_ensemble.model import ModelSpec, build_model, degree_histogram

    torch.set_num_threads(1)
    torch.manual_seed(0)
    graphs = alloy_graphs(count)
    histogram = degree_histogram(graphs)
    spec = ModelSpec(mpnn_type=mpnn_type, hidden_dim=hidden, num_conv_layers=3,
                     heads=HeadRegistry.of([HeadSpec("energy", "graph", 1, "eV/atom")]), node_feature_dim=1,
                     edge_dim=1, radius=RADIUS, pna_degree_histogram=histogram)
    model = build_model(spec)
    if implementation == "pyg-ref" and not _reference_layers(model, mpnn_type, hidden, histogram):
        return None
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader(graphs, batch_size=32, shuffle=True)

    def epoch() -> float:
        start = time.perf_counter()
        for batch in loader:
            loss = torch.nn.functional.mse_loss(model(batch)["energy"], batch.y_energy)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
        return len(graphs) / (time.perf_counter() - start)

    model.train()
    epoch()  # warm-up
    rates = [epoch() for _ in range(repeats)]
    rss_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    edges = sum(g.edge_index.shape[1] for g in graphs) / len(graphs)
    return Measurement(mpnn_type, hidden, implementation, statistics.median(rates), model.num_parameters(),
                       rss_gb, edges)


def _run_child(mpnn_type: str, hidden: int, implementation: str, count: int, repeats: int) -> Measurement | None:
    # -P: do not put bench/ on sys.path (bench/graph_builders.py would shadow the package)
    cmd = [sys.executable, "-P", __file__, "--child", mpnn_type, str(hidden), implementation, str(count), str(repeats)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{mpnn_type} hidden {hidden} ({implementation}) failed:\n{done.stderr[-2000:]}")
    payload = json.loads(done.stdout.strip().splitlines()[-1])
    return None if payload is None else Measurement(**payload)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print one table row per (type, hidden)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--types", default=",".join(ALL_TYPES))
    parser.add_argument("--hidden", default="64,128")
    parser.add_argument("--graphs", type=int, default=96, help="graphs per epoch (batch 32)")
    parser.add_argument("--repeats", type=int, default=3, help="timed epochs (median)")
    parser.add_argument("--no-reference", action="store_true", help="skip the in-run PyG reference")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    if args.child:
        t, h, impl, count, repeats = args.child
        result = measure(t, int(h), impl, int(count), int(repeats))
        print(json.dumps(None if result is None else asdict(result)))
        return 0
    types = [t for t in args.types.split(",") if t]
    unknown = sorted(set(types) - set(ALL_TYPES))
    if unknown:
        parser.error(f"unknown --types {unknown}; valid: {', '.join(ALL_TYPES)}")
    print(f"{'type':7} {'hidden':>6} {'ours g/s':>9} {'params':>8} {'RSS GB':>6} {'pyg-ref':>8} "
          f"{'x ref':>6} {'hydragnn':>9} {'x hydra':>8}  edges/graph")
    for hidden in [int(h) for h in args.hidden.split(",")]:
        for t in types:
            ours = _run_child(t, hidden, "ours", args.graphs, args.repeats)
            ref = None if args.no_reference else _run_child(t, hidden, "pyg-ref", args.graphs, args.repeats)
            anchor = HYDRAGNN_GRAPHS_PER_S.get(hidden, {}).get(t)
            ref_txt = f"{ref.graphs_per_s:8.1f} {ours.graphs_per_s / ref.graphs_per_s:6.2f}" if ref else f"{'-':>8} {'-':>6}"
            hyd_txt = f"{anchor:9.0f} {ours.graphs_per_s / anchor:8.2f}" if anchor else f"{'-':>9} {'-':>8}"
            print(f"{t:7} {hidden:6d} {ours.graphs_per_s:9.1f} {ours.parameters:8d} {ours.peak_rss_gb:6.2f} "
                  f"{ref_txt} {hyd_txt}  {ours.mean_edges:.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
