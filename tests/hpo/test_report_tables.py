"""The report's table parts without a browser: numbers to significant digits, the per-head MAE
columns (an energy per atom in meV/atom: a total from the trial's per-atom MAE, or where every
validation structure has the same atom count), and the importance note's numbers."""

from __future__ import annotations

import pytest
import torch
from ase.build import bulk

from graph_builders.atomic import atoms_to_graph
from graph_builders.schema import HeadRegistry, HeadSpec
from graph_builders.store import write_dataset
from hpo.head_columns import DatasetShape, head_columns, read_dataset_shape
from hpo.importance import MIN_TRIALS, shortfall_note
from hpo.number_format import cell_text, significant
from hpo.state import CampaignState
from hpo_testdata import params, result

HEADS = HeadRegistry.of([HeadSpec("energy", "graph", 1, "eV"), HeadSpec("forces", "node", 3, "eV/Å"),
                         HeadSpec("site_energy", "node", 1, "eV"), HeadSpec("formation", "graph", 1, "eV/atom")])


def test_significant_digits():
    assert significant(0.000316227766016838) == "0.0003162"
    assert significant(1.2345678e-05) == "1.235e-05"
    assert significant(128.0) == "128" and significant(2 / 3, 6) == "0.666667"
    assert cell_text(0.1) == "0.1" and cell_text(7) == "7" and cell_text(None) == "" and cell_text("GIN") == "GIN"
    assert significant(float("nan")) == "nan"


def _graph(repeat: tuple[int, int, int]):
    atoms = bulk("Cu", "fcc", a=3.61, cubic=True).repeat(repeat)
    g = atoms_to_graph(atoms, cutoff=4.0)
    n = len(atoms)
    g["y_energy"], g["y_formation"] = torch.tensor([[-3.5 * n]]), torch.tensor([[0.1]])
    g["y_forces"], g["y_site_energy"] = torch.zeros(n, 3), torch.zeros(n, 1)
    return g


def _dataset(path, val: list[tuple[int, int, int]]):
    graphs = [_graph((1, 1, 1))] * 2 + [_graph(r) for r in val] + [_graph((1, 1, 1))]
    splits = {"trainset": [0, 1], "valset": list(range(2, 2 + len(val))), "testset": [2 + len(val)]}
    return write_dataset(path, graphs, HEADS, splits=splits)


def _trial(energy_mae: float, energy_per_atom: float | None = None):
    heads = {"energy": {"val_mae": energy_mae, "unit": "eV", "val_mae_per_atom": energy_per_atom}, "forces": {"val_mae": 0.05, "unit": "eV/Å"},
             "site_energy": {"val_mae": 0.02, "unit": "eV"}, "formation": {"val_mae": 0.01, "unit": "eV/atom"}}
    events = [{"event": "campaign_started", "time": 0.0, "campaign": {}, "resume": False, "ranks": 2, "slots": 1},
              {"event": "trial_suggested", "time": 0.0, "trial_id": 0, "params": params(0), "attempt": 0},
              {"event": "trial_started", "time": 0.0, "trial_id": 0, "attempt": 0, "slots": [0], "hosts": ["n"],
               "size": 1},
              {"event": "trial_finished", "time": 1.0, "trial_id": 0, "attempt": 0,
               "result": {**result("completed", 0.5), "heads": heads}}]
    return CampaignState.replay(events).trials[0]


def test_a_total_energy_is_per_atom_when_every_validation_structure_has_the_same_atom_count(tmp_path):
    shape = read_dataset_shape(_dataset(tmp_path / "same.bp", [(2, 1, 1), (2, 1, 1)]))
    assert shape == DatasetShape({"energy": "graph", "forces": "node", "site_energy": "node", "formation": "graph"},
                                 8, (8, 8))
    record = _trial(1.6)
    columns = {c.head: c for c in head_columns([record], shape)}
    assert [c.header for c in columns.values()] == ["energy MAE (meV/atom)", "forces MAE (eV/Å)",
                                                    "site_energy MAE (eV)", "formation MAE (meV/atom)"]
    assert columns["energy"].value(record) == pytest.approx(1000 * 1.6 / 8)
    # a node-level eV head is per atom already; a head in eV/atom is shown in meV/atom
    assert columns["site_energy"].value(record) == 0.02 and columns["formation"].value(record) == pytest.approx(10.0)


def test_a_total_energy_stays_per_structure_when_sizes_differ_or_the_dataset_is_gone(tmp_path):
    mixed = read_dataset_shape(_dataset(tmp_path / "mixed.bp", [(1, 1, 1), (2, 1, 1)]))
    assert mixed.atoms is None and mixed.atom_counts == (4, 8)
    record = _trial(1.6)
    for shape in (mixed, read_dataset_shape(tmp_path / "moved_away.bp"), None):
        energy = head_columns([record], shape)[0]
        assert energy.header == "energy MAE (eV per structure)" and energy.value(record) == 1.6


def test_a_total_energy_is_per_atom_where_the_trials_report_it_whatever_the_sizes(tmp_path):
    """The trainer's val_mae_per_atom (mean of |error| / atoms) is shown in meV/atom, whatever the
    validation structures' sizes; a trial without it falls back to per structure only where sizes
    differ (it then has no value in the per-atom column)."""
    mixed = read_dataset_shape(tmp_path / "moved_away.bp")
    reported, old = _trial(1.6, 0.0291), _trial(1.2)
    energy = head_columns([reported, old], mixed)[0]
    assert energy.header == "energy MAE (meV/atom)"
    assert energy.value(reported) == pytest.approx(29.1) and energy.value(old) is None


def test_the_importance_note_says_how_many_trials_it_needs_and_how_many_there_are():
    events = [{"event": "campaign_started", "time": 0.0, "campaign": {}, "resume": False, "ranks": 2, "slots": 1}]
    outcomes = [("completed", 0.5)] * 5 + [("timeout", 0.4), ("timeout", None), ("stopped", 0.9), ("failed", None)]
    for tid, (status, objective) in enumerate(outcomes):
        events += [{"event": "trial_suggested", "time": tid, "trial_id": tid, "params": params(tid), "attempt": 0},
                   {"event": "trial_started", "time": tid, "trial_id": tid, "attempt": 0, "slots": [0],
                    "hosts": ["n"], "size": 1},
                   {"event": "trial_progress", "time": tid + 0.5, "trial_id": tid, "attempt": 0, "epoch": 1,
                    "objective": 1.0},
                   {"event": "trial_finished", "time": tid + 1, "trial_id": tid, "attempt": 0,
                    "result": result(status, objective)}]
    note = shortfall_note(CampaignState.replay(events))
    completed = sum(1 for status, objective in outcomes if status in ("completed", "timeout") and objective is not None)
    assert completed == 6
    assert note == (f"Too few completed trials for an importance estimate: it needs at least {MIN_TRIALS} completed "
                    "trials (completed, or timed out with an objective) and this campaign has 6. Counting the trials "
                    f"stopped early, at an epoch at least {MIN_TRIALS} trials reached, needs {MIN_TRIALS} trials that "
                    "reported epochs: 8 did.")
