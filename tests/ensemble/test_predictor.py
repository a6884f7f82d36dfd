"""The ensemble predictor: mean/std against a hand computation, graphs built once, radius masks,
portability, and the predict CLI with good and bad inputs."""

from __future__ import annotations

import csv
import shutil

import ase.io
import numpy as np
import pytest
from ase import Atoms
from ase.build import bulk
from torch_geometric.data import Batch

from ensemble import EnsemblePredictor, read_manifest, read_split, write_manifest
from graph_builders.atomic import atoms_to_graph
from hydragnn_ensemble.inference import load_checkpoint


def _alloys() -> list[Atoms]:
    out = []
    for k, (a, sub, idx) in enumerate([(3.6, "Ni", [0, 5]), (3.7, "Pd", [1, 2, 9]), (3.8, "Au", [3]),
                                       (3.65, "Ni", [4, 6, 7, 8])]):
        atoms = bulk("Cu", "fcc", a=a, cubic=True).repeat((2, 2, 2))
        atoms.symbols[idx] = sub
        atoms.rattle(0.03, seed=k)
        out.append(atoms)
    return out


def _own_predictions(campaign_root, trial_id, graphs):
    """One member on its own: checkpoint from the campaign, one graph at a time."""
    loaded = load_checkpoint(campaign_root / "trials" / str(trial_id) / "checkpoint.pt")
    outs = [loaded.predict(Batch.from_data_list([g])) for g in graphs]
    return {k: np.concatenate([o[k].double().numpy() for o in outs]) for k in outs[0]}


def test_mean_and_std_equal_a_hand_computation(direct_campaign, direct_ensemble):
    predictor = EnsemblePredictor(direct_ensemble, batch_size=5)
    graphs = read_split(direct_campaign.dataset, "testset")
    pred = predictor.predict_graphs(graphs)
    ids = [m.trial_id for m in read_manifest(direct_ensemble).members]
    own = [_own_predictions(direct_campaign.root, i, graphs) for i in ids]
    assert 4 in ids  # the GaussianNLL member: the only one with a variance
    for head in ("formation_energy", "stress", "forces"):
        stack = np.stack([o[head] for o in own])
        mean = stack.mean(0)
        epistemic = np.sqrt(((stack - mean) ** 2).mean(0))
        aleatoric = np.sqrt(own[ids.index(4)][head + "__var"])
        hp = pred.heads[head]
        scale = np.abs(mean).max()
        np.testing.assert_allclose(hp.mean, mean, atol=1e-5 * scale)
        np.testing.assert_allclose(hp.epistemic_std, epistemic, atol=1e-5 * scale)
        np.testing.assert_allclose(hp.aleatoric_std, aleatoric, rtol=1e-4)
        np.testing.assert_allclose(hp.std, np.sqrt(epistemic ** 2 + aleatoric ** 2), rtol=1e-4, atol=1e-5 * scale)
        assert hp.member_ids == ids
    n_nodes = sum(g.num_nodes for g in graphs)
    assert pred.heads["forces"].mean.shape == (n_nodes, 3)
    assert pred.heads["stress"].mean.shape == (len(graphs), 6)


def test_each_graph_is_built_once_for_all_members(direct_ensemble):
    calls = []

    def counting_builder(atoms, **kwargs):
        calls.append(kwargs["cutoff"])
        return atoms_to_graph(atoms, **kwargs)

    predictor = EnsemblePredictor(direct_ensemble, graph_builder=counting_builder)
    structures = _alloys()
    pred = predictor.predict_atoms(structures)
    assert predictor.num_members == 3
    assert calls == [5.0] * len(structures)  # not 3 x 4
    direct = EnsemblePredictor(direct_ensemble).predict_graphs([atoms_to_graph(a, cutoff=5.0) for a in structures])
    np.testing.assert_allclose(pred.heads["formation_energy"].mean, direct.heads["formation_energy"].mean)


def test_member_with_smaller_radius_sees_only_its_edges(direct_campaign, direct_ensemble, tmp_path):
    copy = tmp_path / "ens"
    shutil.copytree(direct_ensemble, copy)
    manifest = read_manifest(copy)
    manifest.members[0].radius = 4.0  # the graphs are still built at 5.0 (the largest radius)
    write_manifest(copy, manifest)
    predictor = EnsemblePredictor(copy)
    assert predictor.cutoff == 5.0
    structures = _alloys()
    pred = predictor.predict_atoms(structures)
    first = manifest.members[0].trial_id
    own = _own_predictions(direct_campaign.root, first, [atoms_to_graph(a, cutoff=4.0) for a in structures])
    masked_diff = np.abs(pred.heads["formation_energy"].members[0] - own["formation_energy"]).max()
    full = _own_predictions(direct_campaign.root, first, [atoms_to_graph(a, cutoff=5.0) for a in structures])
    full_diff = np.abs(pred.heads["formation_energy"].members[0] - full["formation_energy"]).max()
    assert masked_diff < 1e-6 and full_diff > 10 * masked_diff, (masked_diff, full_diff)  # the mask matters


def test_ensemble_directory_is_portable(direct_campaign, direct_ensemble, tmp_path):
    moved = tmp_path / "elsewhere" / "ens"
    shutil.copytree(direct_ensemble, moved)
    graphs = read_split(direct_campaign.dataset, "valset")
    a = EnsemblePredictor(direct_ensemble).predict_graphs(graphs)
    b = EnsemblePredictor(moved).predict_graphs(graphs)
    np.testing.assert_array_equal(a.heads["forces"].mean, b.heads["forces"].mean)


def test_predict_cli_good_and_bad_inputs(direct_ensemble, direct_campaign, tmp_path, capsys):
    from hydragnn_ensemble.cli import main

    structures = _alloys()
    ase.io.write(tmp_path / "good.extxyz", structures[:3])
    ase.io.write(tmp_path / "one.cif", structures[3])
    (tmp_path / "broken.xyz").write_text("3\nbroken\nCu 0 0\n")
    ase.io.write(tmp_path / "isolated.xyz", Atoms("Cu2", positions=[[0, 0, 0], [20, 0, 0]]))
    out, forces = tmp_path / "pred.csv", tmp_path / "forces.extxyz"
    rc = main(["predict", str(direct_ensemble), str(tmp_path / "good.extxyz"), str(tmp_path / "broken.xyz"),
               str(tmp_path / "isolated.xyz"), str(tmp_path / "one.cif"), str(tmp_path / "nope.cif"),
               "-o", str(out), "--forces-out", str(forces), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 1
    assert f"bad input: {tmp_path / 'broken.xyz'}: cannot read as 'extxyz'" in err
    assert f"bad input: {tmp_path / 'isolated.xyz'}[0]: Cu2: 2 atom(s) have no neighbour" in err
    assert f"bad input: {tmp_path / 'nope.cif'}: no such file" in err
    rows = list(csv.DictReader(out.open()))
    assert [(r["source"], r["index"]) for r in rows] == [
        (str(tmp_path / "good.extxyz"), "0"), (str(tmp_path / "good.extxyz"), "1"),
        (str(tmp_path / "good.extxyz"), "2"), (str(tmp_path / "one.cif"), "0")]
    assert [r["formula"] for r in rows] == [a.get_chemical_formula(mode="metal") for a in structures]
    assert all(r["num_atoms"] == "32" for r in rows)
    expected = EnsemblePredictor(direct_ensemble).predict_atoms(structures)
    got = np.array([float(r["formation_energy_mean"]) for r in rows])
    np.testing.assert_allclose(got, expected.heads["formation_energy"].mean[:, 0], rtol=1e-5)
    got_std = np.array([float(r["stress_5_std"]) for r in rows])
    np.testing.assert_allclose(got_std, expected.heads["stress"].std[:, 5], rtol=1e-5)
    frames = ase.io.read(forces, ":")
    assert len(frames) == 4
    np.testing.assert_allclose(frames[1].arrays["forces_mean"], expected.heads["forces"].mean[32:64], atol=1e-6)
    np.testing.assert_allclose(frames[1].arrays["forces_std"], expected.heads["forces"].std[32:64], atol=1e-6)
    # only bad inputs: nothing predicted, exit code 2
    rc = main(["predict", str(direct_ensemble), str(tmp_path / "broken.xyz"), "-o", str(tmp_path / "x.csv")])
    assert rc == 2 and not (tmp_path / "x.csv").exists()
    # the flag the isolated-atom message recommends exists and makes it predictable
    capsys.readouterr()
    rc = main(["predict", str(direct_ensemble), str(tmp_path / "isolated.xyz"), "-o", str(tmp_path / "iso.csv"),
               "--allow-isolated", "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    assert [r["formula"] for r in csv.DictReader((tmp_path / "iso.csv").open())] == ["Cu2"]


def test_predict_cli_on_a_dataset_file(direct_ensemble, direct_campaign, tmp_path):
    from graph_builders.store import GraphStore
    from hydragnn_ensemble.cli import main

    out = tmp_path / "p.csv"
    assert main(["predict", str(direct_ensemble), str(direct_campaign.dataset), "-o", str(out), "--no-progress"]) == 0
    rows = list(csv.DictReader(out.open()))
    with GraphStore(direct_campaign.dataset) as store:
        total = sum(store.num_graphs(s) for s in store.split_names)
        first = store.get("trainset", 0)
    assert len(rows) == total
    assert (rows[0]["index"], rows[0]["name"]) == ("trainset:0", first.name)


def test_shared_edge_work_gives_the_same_predictions_and_computes_geometry_once(direct_campaign, tmp_path):
    import torch

    from ensemble import BuildOptions, build_ensemble
    from ensemble.edge_work import EdgeWork
    from ensemble.predictor import MemberModel, run_members, slim_graph

    out = tmp_path / "all5"
    build_ensemble(direct_campaign.root, out, BuildOptions(top_k=5, method="topk"))
    graphs = read_split(direct_campaign.dataset, "testset")
    fused = EnsemblePredictor(out, batch_size=7)
    plain = EnsemblePredictor(out, batch_size=7)
    a = run_members(fused.members, graphs, cutoff=5.0, batch_size=7)
    b = run_members(plain.members, graphs, cutoff=5.0, batch_size=7, share_edge_work=False)
    for oa, ob in zip(a, b):
        pa, pb = oa.preds, ob.preds
        assert sorted(pa) == sorted(pb)
        for key in pa:
            np.testing.assert_allclose(pa[key], pb[key], rtol=1e-5, atol=1e-5 * max(np.abs(pb[key]).max(), 1e-12))
        np.testing.assert_allclose(oa.features, ob.features, rtol=1e-4, atol=1e-4 * np.abs(ob.features).max())
    geometric = [m for m in fused.members if m.loaded.geometry_encoder is not None]
    types = sorted(m.loaded.spec.mpnn_type for m in geometric)
    assert types == ["CGCNN", "SchNet"]  # GIN has no geometry to share
    # two members with the same radius and basis: the encoder runs once per batch (the first
    # member's; the second is handed the result), and the models' own encoders stay in place
    calls = {id(m): [] for m in geometric}
    for m in geometric:
        m.loaded.model.geometry.register_forward_hook(lambda *args, key=id(m): calls[key].append(1))
    batch = Batch.from_data_list([slim_graph(g) for g in graphs[:4]])
    work = EdgeWork(batch)
    for m in geometric:
        with torch.inference_mode():
            m.loaded.predict(batch, work.geometry_for(m.loaded.geometry_encoder))
    assert [len(c) for c in calls.values()] == [1, 0] and work.hits == 1
    # without a shared geometry each model computes its own
    own = geometric[1].loaded.predict(batch)
    assert len(calls[id(geometric[1])]) == 1
    member = MemberModel(0, 1.0, geometric[1].loaded, 5.0)
    again = run_members([member], graphs[:4], cutoff=5.0)[0].preds
    np.testing.assert_allclose(again["formation_energy"], own["formation_energy"].double().numpy(), rtol=1e-6)


def test_predict_csv_reports_the_domain_and_the_terms(direct_ensemble, tmp_path, capsys):
    from ensemble import calibrate
    from hydragnn_ensemble.cli import main

    ens = tmp_path / "ens"
    shutil.copytree(direct_ensemble, ens)
    calibrate(ens, plots=False)
    inside = _alloys()[:2]
    vacancy = _alloys()[2]
    del vacancy[4]
    ase.io.write(tmp_path / "s.extxyz", inside + [vacancy])
    assert main(["predict", str(ens), str(tmp_path / "s.extxyz"), "-o", str(tmp_path / "p.csv"), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "1 of 3 outside the ensemble's applicability domain" in printed
    rows = list(csv.DictReader((tmp_path / "p.csv").open()))
    assert [r["in_domain"] for r in rows] == ["yes", "yes", "no"]
    assert rows[2]["domain_reasons"].startswith("17 of 31 atom(s) outside the training envelope: 15 with neighbour shells")
    assert "7 with nearest-neighbour distances +2.0% beyond the training range" in rows[2]["domain_reasons"]
    for row in rows:
        parts = [float(row[f"formation_energy_{t}_std"]) for t in ("epistemic", "aleatoric", "distance", "domain", "strain")]
        assert float(row["formation_energy_std"]) == pytest.approx(np.sqrt(np.sum(np.square(parts))), rel=1e-4)
        assert float(row["latent_distance"]) > 0
    assert float(rows[2]["formation_energy_domain_std"]) > 0 == float(rows[0]["formation_energy_domain_std"])


def test_shared_geometry_is_completed_for_each_layer_family() -> None:
    """A geometry computed for a family that reads a radial table carries no per-edge basis; shared
    with a family that reads the basis (CGCNN), it gets one computed then, and the other way round
    a table-reading family gets its table: one geometry per batch, whatever the members' order."""
    import torch

    from ensemble.edge_work import EdgeWork
    from hydragnn_ensemble.model.geometry import GeometryEncoder

    vectors = 2.0 * torch.randn(20_000, 3, generator=torch.Generator().manual_seed(0))
    reads_table, reads_basis = GeometryEncoder(5.0, 50, radial_table=True), GeometryEncoder(5.0, 50)
    work = EdgeWork(batch=None, vectors=vectors)
    first = work.geometry_for(reads_table)
    assert first.radial is not None and first.rbf is None
    assert work.geometry_for(reads_basis) is first and work.hits == 1
    torch.testing.assert_close(first.rbf, reads_basis.basis(first.distance))
    work = EdgeWork(batch=None, vectors=vectors)
    first = work.geometry_for(reads_basis)
    assert first.radial is None and first.rbf is not None
    assert work.geometry_for(reads_table).radial is not None
