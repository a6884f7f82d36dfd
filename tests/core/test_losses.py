"""The evaluation accumulator's MAE per atom of a total energy, against a hand computation."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Batch

from graph_builders.schema import HeadRegistry, HeadSpec
from hydragnn_ensemble.train.losses import MultiHeadLoss
from hydragnn_ensemble.train.normalisation import HeadStats, Normaliser


def _batch(atoms: list[int], energy: list[float], per_atom: list[float]) -> Batch:
    batch = Batch(y_energy=torch.tensor(energy).reshape(-1, 1), y_formation=torch.tensor(per_atom).reshape(-1, 1))
    batch.ptr = torch.tensor([0, *torch.cumsum(torch.tensor(atoms), 0).tolist()])
    return batch


def test_a_total_energy_gets_the_mean_of_its_errors_per_atom_over_batches():
    heads = HeadRegistry.of([HeadSpec("energy", "graph", 1, "eV"), HeadSpec("formation", "graph", 1, "eV/atom")])
    one = HeadStats(torch.zeros(1), torch.ones(1))
    loss = MultiHeadLoss(heads, Normaliser({"energy": one, "formation": one}), [1.0, 1.0], "mse",
                         ("energy", "formation"), torch.device("cpu"))
    acc = loss.new_accumulator(torch.device("cpu"))
    batches = [(_batch([4, 8], [-10.0, -20.0], [0.1, 0.2]), [-9.0, -22.0], [0.1, 0.25]),
               (_batch([2], [-5.0], [0.3]), [-5.5], [0.2])]
    for batch, energy, formation in batches:
        out = {"energy": torch.tensor(energy).reshape(-1, 1), "formation": torch.tensor(formation).reshape(-1, 1)}
        loss.accumulate(acc, out, batch)
    by_hand = (1.0 / 4 + 2.0 / 8 + 0.5 / 2) / 3
    assert loss.per_atom_errors(acc) == {"energy": pytest.approx(by_hand)}  # not the per-atom head
    assert loss.head_errors(acc)["energy"][0] == pytest.approx((1.0 + 2.0 + 0.5) / 3)
