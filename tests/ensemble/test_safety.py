"""Nothing a user types destroys a campaign or an input; paths recorded in files stay inside their
directory; a good trial is never left out without a word."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import ase.io
import pytest
from ase.build import bulk

from ensemble import (
    BuildOptions,
    EnsembleBuildError,
    EnsembleIntegrityError,
    EnsemblePredictor,
    build_ensemble,
    read_campaign,
    read_manifest,
)
from hydragnn_ensemble.cli import main


def _tree(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in sorted(root.rglob("*")) if p.is_file()}


def test_select_never_writes_over_or_into_its_inputs(direct_campaign, tmp_path, capsys):
    camp = tmp_path / "camp"
    shutil.copytree(direct_campaign.root, camp)
    before = _tree(camp)
    for out in (camp, camp / "ens", tmp_path):  # the campaign itself, inside it, a directory holding it
        assert main(["select", str(camp), "-o", str(out), "--force", "--top-k", "2", "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert f"error: ensemble directory {out}" in err and str(camp) in err
    assert _tree(camp) == before
    foreign = tmp_path / "results"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("keep")
    assert main(["select", str(camp), "-o", str(foreign), "--force", "--top-k", "2", "--no-progress"]) == 2
    assert "is not a previous output of this command (ensemble directory)" in capsys.readouterr().err
    assert (foreign / "thesis.tex").read_text() == "keep"
    # --force replaces what select wrote before
    ens = tmp_path / "ens"
    assert main(["select", str(camp), "-o", str(ens), "--top-k", "2", "--no-progress"]) == 0
    assert main(["select", str(camp), "-o", str(ens), "--top-k", "3", "--no-progress"]) == 2
    assert main(["select", str(camp), "-o", str(ens), "--top-k", "3", "--no-progress", "--force"]) == 0
    assert len(read_manifest(ens).members) == 3


def test_select_names_the_good_trials_it_had_to_leave_out(direct_campaign, tmp_path, capsys):
    camp = tmp_path / "camp"
    shutil.copytree(direct_campaign.root, camp)
    ranked = read_campaign(camp).ranked()
    best, second = ranked[0], ranked[1]
    (camp / "trials" / str(best.trial_id) / "checkpoint.pt").unlink()
    (camp / "trials" / str(second.trial_id) / "result.json").write_text("{not json")
    assert main(["select", str(camp), "-o", str(tmp_path / "e"), "--top-k", "2", "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert (f"warning: trial {best.trial_id} (objective {best.objective:.6g}) would have been a candidate "
            "but is left out: checkpoint checkpoint.pt is missing") in err
    assert f"warning: trial {second.trial_id} (objective {second.objective:.6g})" in err
    manifest = read_manifest(tmp_path / "e")
    excluded = {e.trial_id: e for e in manifest.selection.excluded}
    assert set(excluded) == {best.trial_id, second.trial_id}
    assert excluded[second.trial_id].reason.endswith("not a valid result.json (Expecting property name "
                                                     "enclosed in double quotes: line 1 column 2 (char 1))")
    assert best.trial_id not in [m.trial_id for m in manifest.members]
    # the failed/diverged trials that never had a usable objective are not "left out good trials"
    assert all(e.objective is not None for e in manifest.selection.excluded)


def test_paths_in_manifest_and_result_json_stay_inside(direct_campaign, direct_ensemble, tmp_path):
    ens = tmp_path / "ens"
    shutil.copytree(direct_ensemble, ens)
    outside = tmp_path / "outside.pt"
    member = read_manifest(ens).members[0]
    shutil.copyfile(ens / member.checkpoint, outside)
    data = json.loads((ens / "manifest.json").read_text())
    for bad in ("../outside.pt", str(outside)):
        data["members"][0]["checkpoint"] = bad
        (ens / "manifest.json").write_text(json.dumps(data))
        with pytest.raises(EnsembleIntegrityError, match=f"member trial {member.trial_id}: checkpoint"):
            read_manifest(ens, verify=False)
        with pytest.raises(EnsembleIntegrityError):
            EnsemblePredictor(ens, verify=False)
    link = ens / "members" / "link.pt"
    os.symlink(outside, link)
    data["members"][0]["checkpoint"] = "members/link.pt"
    (ens / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(EnsembleIntegrityError, match="leads outside"):
        read_manifest(ens, verify=False)
    # a result.json checkpoint outside its trial directory: excluded, never copied
    camp = tmp_path / "camp"
    shutil.copytree(direct_campaign.root, camp)
    best = read_campaign(camp).ranked()[0]
    result_path = camp / "trials" / str(best.trial_id) / "result.json"
    result = json.loads(result_path.read_text())
    result["checkpoint"] = "../0/checkpoint.pt"
    result_path.write_text(json.dumps(result))
    trial = read_campaign(camp).trials[best.trial_id]
    assert not trial.eligible and "leads outside" in trial.excluded_because
    manifest = build_ensemble(camp, tmp_path / "e2", BuildOptions(top_k=2))
    assert best.trial_id not in [m.trial_id for m in manifest.members]
    assert [e.trial_id for e in manifest.selection.excluded] == [best.trial_id]


def test_predict_export_and_graphs_never_overwrite_inputs(direct_campaign, direct_ensemble, tmp_path, capsys):
    structure = tmp_path / "cu.extxyz"
    ase.io.write(structure, bulk("Cu", "fcc", a=3.61, cubic=True).repeat(2))
    before = structure.read_bytes()
    assert main(["predict", str(direct_ensemble), str(structure), "-o", str(structure), "--no-progress"]) == 2
    assert f"error: predictions CSV {structure} is the input {structure}" in capsys.readouterr().err
    assert structure.read_bytes() == before
    inside = direct_ensemble / "p.csv"
    assert main(["predict", str(direct_ensemble), str(structure), "-o", str(inside), "--no-progress"]) == 2
    assert "lies inside the input" in capsys.readouterr().err and not inside.exists()
    notes = tmp_path / "notes.csv"
    notes.write_text("my,own,table\n")
    assert main(["predict", str(direct_ensemble), str(structure), "-o", str(notes), "--no-progress"]) == 2
    assert notes.read_text() == "my,own,table\n"
    good = tmp_path / "pred.csv"
    for _ in range(2):  # a previous predictions CSV is replaced
        assert main(["predict", str(direct_ensemble), str(structure), "-o", str(good), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["export", str(direct_campaign.root), "-o", str(direct_campaign.root / "top"), "--top-k", "2"]) == 2
    assert "export directory" in capsys.readouterr().err and not (direct_campaign.root / "top").exists()
    assert main(["build-graphs", "--scale", "atomic", str(tmp_path), "-o", str(tmp_path / "d.bp")]) == 2
    assert f"dataset {tmp_path / 'd.bp'} lies inside the input {tmp_path}" in capsys.readouterr().err
    assert main(["demo-data", "alloy", "--num", "2", "-o", str(notes), "--no-progress"]) == 2
    assert notes.read_text() == "my,own,table\n"


def test_build_graphs_keeps_the_good_frames_of_a_file_with_one_bad_frame(tmp_path, capsys):
    from graph_builders.store import GraphStore

    frames = [bulk("Cu", "fcc", a=3.61, cubic=True).repeat(2) for _ in range(3)]
    frames[1].positions[1] = frames[1].positions[0]  # a duplicated atom
    inputs = tmp_path / "in"
    inputs.mkdir()
    ase.io.write(inputs / "frames.extxyz", frames)
    lonely = bulk("Cu", "fcc", a=3.61, cubic=True)
    lonely.center(vacuum=10.0)
    lonely.pbc = False
    lonely = lonely[:1]
    ase.io.write(inputs / "lonely.xyz", lonely)
    out = tmp_path / "d.bp"
    assert main(["build-graphs", "--scale", "atomic", str(inputs), "-o", str(out), "--no-progress",
                 "--predict-only"]) == 1  # the cells carry no labels
    printed = capsys.readouterr().out
    assert f"{inputs / 'frames.extxyz'}[1]: 1 pair(s) of atoms closer than 0.5 Å" in printed
    assert "have no neighbour within the cutoff" in printed and "--allow-isolated" in printed
    with GraphStore(out) as store:
        assert sum(store.num_graphs(s) for s in store.split_names) == 2
    assert main(["build-graphs", "--scale", "atomic", str(inputs), "-o", str(out), "--no-progress",
                 "--predict-only", "--allow-isolated"]) == 1  # the duplicated atom still fails; the lone atom is kept
    with GraphStore(out) as store:
        assert sum(store.num_graphs(s) for s in store.split_names) == 3


def _edited_manifest(src: Path, dst: Path, edit) -> Path:
    shutil.copytree(src, dst)
    data = json.loads((dst / "manifest.json").read_text())
    edit(data)
    (dst / "manifest.json").write_text(json.dumps(data))
    return dst


@pytest.mark.parametrize("weights, message", [
    (["Infinity", 0.5, 0.5], "weight inf is not finite and positive"),
    ([1e308, 1e308, 1e308], "the members' weights sum to inf, not 1"),
    ([0.5, 0.5, 0.5], "the members' weights sum to 1.5, not 1"),
])
def test_manifest_weights_must_be_finite_positive_and_sum_to_one(direct_ensemble, tmp_path, capsys, weights,
                                                                 message):
    """N6: weights of Infinity gave NaN predictions, of 1e308 a mean of exactly 0; both exit 0."""
    ens = tmp_path / "ens"
    shutil.copytree(direct_ensemble, ens)
    data = json.loads((ens / "manifest.json").read_text())
    for member, w in zip(data["members"], weights):
        member["weight"] = w
    (ens / "manifest.json").write_text(json.dumps(data).replace('"Infinity"', "Infinity"))  # as Python's json reads it
    with pytest.raises(EnsembleIntegrityError, match=message):
        read_manifest(ens)
    structure = tmp_path / "cu.extxyz"
    ase.io.write(structure, bulk("Cu", "fcc", a=3.6, cubic=True))
    assert main(["predict", str(ens), str(structure), "-o", str(tmp_path / "p.csv"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and message in err and "Traceback" not in err


def test_a_member_checkpoint_swapped_for_another_valid_one_is_named(direct_ensemble, tmp_path):
    """N13: a member's checkpoint replaced by another member's (checksum updated) ended in a
    traceback inside the latent references; now the architecture check names the member."""
    manifest = read_manifest(direct_ensemble)
    a, b = next((a, b) for a in manifest.members for b in manifest.members
                if a.config["NeuralNetwork"]["Architecture"] != b.config["NeuralNetwork"]["Architecture"])

    def swap(data):
        entry = next(m for m in data["members"] if m["trial_id"] == a.trial_id)
        entry["checkpoint"], entry["sha256"] = b.checkpoint, b.sha256
    ens = _edited_manifest(direct_ensemble, tmp_path / "ens", swap)
    with pytest.raises(EnsembleIntegrityError, match=rf"member trial {a.trial_id}: .*{b.checkpoint}: architecture "
                                                     "does not match the config"):
        EnsemblePredictor(ens)


def test_nul_bytes_deep_nesting_and_pickled_arrays_are_named(calibrated_potential_ensemble, tmp_path):
    """N14: a NUL byte in a checkpoint path, a manifest nested 100,000 deep and an uncertainty.npz
    holding pickled objects each raised an error that named neither file nor member."""
    import numpy as np

    member = read_manifest(calibrated_potential_ensemble).members[0]

    def nul(data):
        data["members"][0]["checkpoint"] = "members/a\u0000b.pt"
    ens = _edited_manifest(calibrated_potential_ensemble, tmp_path / "nul", nul)
    with pytest.raises(EnsembleIntegrityError, match=f"member trial {member.trial_id}: checkpoint .* NUL byte"):
        read_manifest(ens, verify=False)
    deep = tmp_path / "deep"
    shutil.copytree(calibrated_potential_ensemble, deep)
    (deep / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(EnsembleIntegrityError, match="manifest.json: invalid manifest: nested deeper"):
        read_manifest(deep)
    pickled = tmp_path / "pickled"
    shutil.copytree(calibrated_potential_ensemble, pickled)
    info = read_manifest(pickled).uncertainty
    np.savez(pickled / info.file, **{"m0_x": np.array([{"a": 1}], dtype=object)})
    with pytest.raises(EnsembleIntegrityError, match=f"{info.file}: not the ensemble's uncertainty arrays"):
        EnsemblePredictor(pickled, verify=False)
