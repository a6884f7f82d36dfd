"""Every layer type offered in potential mode learns forces.

Each type the model accepts as a potential (the ``needs_geometry`` families of the registry) trains
with the real trainer on small EMT alloys (8-atom Cu/Ni/Pd/Au cells, rattled and strained; the
alloy example's potential config shrunk: hidden 32, 2 layers, 30 epochs) and must reach a forces
validation MAE of at most half the trivial predictor's (zero forces: the mean |F| component of the
validation split, recomputed here with ASE's EMT on the stored positions). Before the radial filter
EGNN ended at 1.00 of it and CGCNN at 0.62; now 0.30-0.34 and 0.25-0.28, SchNet 0.38-0.39, PaiNN
0.21-0.37 (seeds 0 and 1). About 50 s on one core in all.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from ase import Atoms

from graph_builders.datasets.alloy import RANDOM_ONLY, make_alloy_dataset
from graph_builders.datasets.emt import FastEMT
from graph_builders.store import GraphStore, write_dataset
from hydragnn_ensemble.config import config_from_dict
from hydragnn_ensemble.model import MPNN_TYPES
from hydragnn_ensemble.train import train_trial

POTENTIAL_TYPES = tuple(name for name, cls in MPNN_TYPES.items() if cls.needs_geometry)


@pytest.fixture(autouse=True)
def one_thread():
    """One torch thread, as a trial process has (and the same numbers wherever the suite runs)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def emt_alloys(tmp_path_factory) -> tuple[Path, float]:
    """96 random 8-atom alloys with EMT labels (58/19/19 split) and the trivial forces MAE of the
    validation split, from EMT's forces on the stored structures (checked against the labels)."""
    labelled = make_alloy_dataset(num_structures=96, elements=("Cu", "Ni", "Pd", "Au"), components=(2, 3),
                                  sizes=(8,), mix=RANDOM_ONLY, seed=0, progress=False)
    path = write_dataset(tmp_path_factory.mktemp("emt") / "alloys.bp", labelled.graphs, labelled.heads,
                         metadata=labelled.metadata, seed=0, fractions=(0.6, 0.2, 0.2))
    forces = []
    with GraphStore(path) as store:
        for i in range(store.num_graphs("valset")):
            graph = store.get("valset", i)
            atoms = Atoms(numbers=graph.z.numpy(), positions=graph.pos.double().numpy(),
                          cell=graph.cell[0].double().numpy(), pbc=True)
            atoms.calc = FastEMT()
            emt = atoms.get_forces()
            np.testing.assert_allclose(graph.y_forces.numpy(), emt, atol=1e-4)
            forces.append(emt)
    return path, float(np.abs(np.concatenate(forces)).mean())


def potential_config(mpnn_type: str) -> dict:
    """``examples/alloy/potential.json`` with ``mpnn_type``, shrunk to train in seconds (the bench's)."""
    from bench.potential_layers import config

    return config(mpnn_type, epochs=30, seed=0)


def test_the_types_offered_in_potential_mode() -> None:
    assert POTENTIAL_TYPES == ("CGCNN", "SchNet", "EGNN", "PaiNN")


@pytest.mark.slow
@pytest.mark.parametrize("mpnn_type", POTENTIAL_TYPES)
def test_the_layer_learns_forces_as_a_potential(mpnn_type: str, emt_alloys, tmp_path) -> None:
    path, trivial = emt_alloys
    result = train_trial(config_from_dict(potential_config(mpnn_type)), path, tmp_path / "run",
                         device="cpu", progress=False)
    assert result.status == "completed", result.failure_reason
    assert result.epochs == 30
    forces = result.heads["forces"].val_mae
    assert forces <= 0.5 * trivial, f"{mpnn_type}: forces val MAE {forces:.4f}, trivial {trivial:.4f}"
