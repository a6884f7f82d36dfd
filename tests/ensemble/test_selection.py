"""Top-K and greedy selection, exclusion of failed/diverged/unfinished trials, the manifest."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from ensemble import (
    BuildOptions,
    EnsembleBuildError,
    EnsembleIntegrityError,
    SelectionError,
    build_ensemble,
    greedy_selection,
    read_campaign,
    read_manifest,
    select_topk,
    sha256_of,
)

REAL = (0, 1, 2, 3, 4)


def test_topk_orders_by_objective_and_excludes_bad_trials(direct_campaign):
    info = read_campaign(direct_campaign.root)
    expected = sorted(REAL, key=lambda i: direct_campaign.results[i].objective)
    assert [t.trial_id for t in info.ranked()] == expected
    assert {t.trial_id: t.excluded_because for t in info.excluded()} == {
        5: "journal status failed",
        6: "journal status diverged",
        7: "journal status running",
        8: "status timeout without a checkpoint",
    }
    chosen = select_topk(info, 3)
    assert chosen.trial_ids == expected[:3]
    assert chosen.weights == [pytest.approx(1 / 3)] * 3


def test_topk_asking_for_more_than_completed_names_the_excluded(direct_campaign):
    info = read_campaign(direct_campaign.root)
    with pytest.raises(SelectionError) as err:
        select_topk(info, 6)
    msg = str(err.value)
    assert "only 5 completed trial(s) with a checkpoint, 6 asked" in msg
    assert "trial 6 (journal status diverged)" in msg and "trial 7 (journal status running)" in msg


def test_without_journal_result_json_decides(direct_campaign, tmp_path):
    copy = tmp_path / "nojournal"
    shutil.copytree(direct_campaign.root, copy)
    (copy / "journal.jsonl").unlink()
    info = read_campaign(copy)
    excluded = {t.trial_id: t.excluded_because for t in info.excluded()}
    assert excluded[5] == "status failed: RuntimeError: CUDA out of memory"
    assert excluded[6].startswith("status diverged")
    assert 7 not in excluded  # a completed result.json with a checkpoint: a candidate again
    assert info.ranked()[0].trial_id == 7


def test_greedy_picks_with_replacement_and_weights_sum_to_one():
    y = np.array([[-1.0], [1.0]] * 10)  # variance 1
    preds = {"e": np.stack([y + 1.0, y - 1.0, y + 1.5])}
    sel = greedy_selection(preds, {"e": y}, k=4, candidate_ids=[10, 11, 12])
    # picks A (tie with B goes to the earlier), then B (mean exact), then A, then B
    assert sel.trial_ids == [10, 11]
    assert sel.weights == [0.5, 0.5]
    assert sel.history == pytest.approx([1.0, 0.0, 1 / 9, 0.0])
    # one clearly best model is picked every time: weight 1
    preds = {"e": np.stack([y + 1.0, y + 0.1])}
    sel = greedy_selection(preds, {"e": y}, k=3, candidate_ids=[3, 4])
    assert (sel.trial_ids, sel.weights) == ([4], [1.0])


def test_greedy_on_a_real_campaign(direct_campaign, tmp_path):
    manifest = build_ensemble(direct_campaign.root, tmp_path / "g",
                              BuildOptions(top_k=4, method="greedy", candidates=5))
    weights = [m.weight for m in manifest.members]
    assert sum(weights) == pytest.approx(1.0)
    assert all(abs(w * 4 - round(w * 4)) < 1e-12 for w in weights)  # multiples of 1/k
    assert {m.trial_id for m in manifest.members} <= set(REAL)
    assert manifest.selection.candidates == [t.trial_id for t in read_campaign(direct_campaign.root).ranked()]
    assert len(manifest.selection.history) == 4


def test_manifest_records_members(direct_campaign, direct_ensemble):
    from hydragnn_ensemble.train import load_checkpoint

    manifest = read_manifest(direct_ensemble)
    ids = [m.trial_id for m in manifest.members]
    assert ids == [t.trial_id for t in read_campaign(direct_campaign.root).ranked()[:3]]
    for m in manifest.members:
        src = direct_campaign.root / "trials" / str(m.trial_id) / "checkpoint.pt"
        assert m.sha256 == sha256_of(src) == sha256_of(direct_ensemble / m.checkpoint)
        assert m.normalisation == load_checkpoint(src).normaliser.to_dict()
        assert m.config == json.loads((src.parent / "config.json").read_text())
        assert m.metrics["formation_energy"]["val_mae"] == direct_campaign.results[m.trial_id].heads[
            "formation_energy"].val_mae
        assert m.radius == 5.0
    assert manifest.dataset == str(direct_campaign.dataset.resolve())
    assert [m.predicts_variance for m in manifest.members] == [i == 4 for i in ids]


def test_checksum_mismatch_and_missing_member_are_named(direct_ensemble, tmp_path):
    copy = tmp_path / "ens"
    shutil.copytree(direct_ensemble, copy)
    manifest = read_manifest(copy)
    first, second = manifest.members[0], manifest.members[1]
    data = bytearray((copy / first.checkpoint).read_bytes())
    data[-10] ^= 0xFF
    (copy / first.checkpoint).write_bytes(bytes(data))
    with pytest.raises(EnsembleIntegrityError,
                       match=rf"member trial {first.trial_id}: checksum mismatch for {first.checkpoint}"):
        read_manifest(copy)
    shutil.copyfile(direct_ensemble / first.checkpoint, copy / first.checkpoint)
    (copy / second.checkpoint).unlink()
    with pytest.raises(EnsembleIntegrityError,
                       match=rf"member trial {second.trial_id} is missing its checkpoint {second.checkpoint}"):
        read_manifest(copy)


def test_existing_output_is_not_overwritten(direct_campaign, direct_ensemble):
    before = (direct_ensemble / "manifest.json").read_bytes()
    with pytest.raises(EnsembleBuildError, match="already exists"):
        build_ensemble(direct_campaign.root, direct_ensemble, BuildOptions(top_k=2))
    assert (direct_ensemble / "manifest.json").read_bytes() == before


def test_select_cli(direct_campaign, tmp_path, capsys):
    from hydragnn_ensemble.cli import main

    torch.set_num_threads(1)
    rc = main(["select", str(direct_campaign.root), "--top-k", "2", "-o", str(tmp_path / "e"), "--no-progress"])
    assert rc == 0
    assert [m.trial_id for m in read_manifest(tmp_path / "e").members] == \
        [t.trial_id for t in read_campaign(direct_campaign.root).ranked()[:2]]
    rc = main(["select", str(direct_campaign.root), "--top-k", "9", "-o", str(tmp_path / "f")])
    assert rc == 2
    assert "only 5 completed trial(s)" in capsys.readouterr().err
