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


def test_greedy_within_a_budget_skips_what_does_not_fit_and_repeats_for_free():
    y = np.array([[-1.0], [1.0]] * 10)
    preds = {"e": np.stack([y + 1.0, y - 1.0, y + 0.2])}  # A and B average exactly; C is good alone
    free = greedy_selection(preds, {"e": y}, k=4, candidate_ids=[10, 11, 12])
    assert (free.trial_ids, free.weights) == ([12, 11], [0.75, 0.25])  # C three times, then B: exact
    # C costs 5: with a budget of 4 only A (1) and B (2) fit, and together they are exact
    sel = greedy_selection(preds, {"e": y}, k=4, candidate_ids=[10, 11, 12], costs=[1.0, 2.0, 5.0], budget=4.0)
    assert (sel.trial_ids, sel.weights) == ([10, 11], [0.5, 0.5])
    # a budget of 1.5: A alone, picked four times (a repeat costs nothing more)
    sel = greedy_selection(preds, {"e": y}, k=4, candidate_ids=[10, 11, 12], costs=[1.0, 2.0, 5.0], budget=1.5)
    assert (sel.trial_ids, sel.weights, len(sel.history)) == ([10], [1.0], 4)
    with pytest.raises(SelectionError, match="no candidate runs within the budget of 0.5"):
        greedy_selection(preds, {"e": y}, k=2, candidate_ids=[10, 11, 12], costs=[1.0, 2.0, 5.0], budget=0.5)


def test_cost_aware_topk_on_a_real_campaign(direct_campaign, tmp_path):
    """The trainer measured each real trial's inference time; top-K within a budget takes the best
    trials that fit, and the manifest records the budget and the members' summed time."""
    info = read_campaign(direct_campaign.root)
    ranked = info.ranked()
    costs = {t.trial_id: t.result.inference_ms_per_graph for t in ranked}
    assert all(c is not None and 0 < c < 1000 for c in costs.values()), costs
    budget = costs[ranked[0].trial_id] + min(costs[t.trial_id] for t in ranked[1:]) + 1e-9
    chosen = select_topk(info, 3, max_inference_ms=budget)
    assert chosen.trial_ids[0] == ranked[0].trial_id and 1 <= len(chosen.trial_ids) <= 2
    assert sum(costs[t] for t in chosen.trial_ids) <= budget
    expected, spent = [], 0.0  # the reference walk: best first, skip what does not fit
    for t in ranked:
        if len(expected) < 3 and spent + costs[t.trial_id] <= budget:
            expected.append(t.trial_id)
            spent += costs[t.trial_id]
    assert chosen.trial_ids == expected
    with pytest.raises(SelectionError, match="no trial runs within 1e-06 ms per graph"):
        select_topk(info, 3, max_inference_ms=1e-6)
    manifest = build_ensemble(direct_campaign.root, tmp_path / "cheap",
                              BuildOptions(top_k=3, method="topk", max_inference_ms=budget))
    assert manifest.selection.max_inference_ms == budget
    assert manifest.selection.inference_ms == pytest.approx(sum(costs[t] for t in expected))
    with pytest.raises(SelectionError, match="works with the methods"):
        build_ensemble(direct_campaign.root, tmp_path / "d", BuildOptions(method="diverse", max_inference_ms=1.0))


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
    from hydragnn_ensemble.inference import load_checkpoint

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
    with pytest.raises(EnsembleBuildError, match="holds a previous output of this command .ensemble directory.; pass --force"):
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


def test_greedy_per_head_gives_each_head_its_own_weights():
    from ensemble import greedy_per_head

    rng = np.random.default_rng(0)
    y_a = rng.normal(size=(40, 1))
    y_b = rng.normal(size=(40, 2))
    # candidate 0 is exact on head a and poor on b; candidate 1 the reverse; 2 and 3 are middling;
    # 1 and 2 together are (almost) exact on b
    noise = rng.normal(size=(40, 2))
    preds = {
        "a": np.stack([y_a, y_a + 1.0, y_a + 0.5, y_a - 0.9]),
        "b": np.stack([y_b + 2.0, y_b + 0.3 * noise, y_b - 0.3003 * noise, y_b + 0.5]),
    }
    targets = {"a": y_a, "b": y_b}
    sel = greedy_per_head(preds, targets, k=3, candidate_ids=[20, 21, 22, 23], rounds=4)
    assert sel.method == "greedy-per-head"
    assert sel.trial_ids == [20, 21, 22]  # a picks 20, b picks 21, then b adds 22; cap of k=3
    assert sel.head_weights == {"a": [1.0, 0.0, 0.0], "b": [0.0, 0.5, 0.5]}
    for weights in sel.head_weights.values():
        assert sum(weights) == pytest.approx(1.0)
    assert sel.weights == pytest.approx([0.5, 0.25, 0.25])
    # validation MSE of each head is lower than with the joint (one weight per member) greedy pick
    joint = greedy_selection(preds, targets, k=4, candidate_ids=[20, 21, 22, 23])

    def head_mse(head: str, ids: list[int], weights: list[float]) -> float:
        mean = sum(w * preds[head][i - 20] for i, w in zip(ids, weights))
        return float(np.mean((mean - targets[head]) ** 2))

    for head in ("a", "b"):
        assert head_mse(head, sel.trial_ids, sel.head_weights[head]) < 1e-6
        assert head_mse(head, joint.trial_ids, joint.weights) > 0.01
    # at most k distinct members even when every head would like a new one
    sel1 = greedy_per_head(preds, targets, k=1, candidate_ids=[20, 21, 22, 23], rounds=3)
    assert sel1.trial_ids == [20] and sel1.head_weights == {"a": [1.0], "b": [1.0]}
    with pytest.raises(SelectionError, match="rounds must be >= 1, got 0"):
        greedy_per_head(preds, targets, k=2, candidate_ids=[20, 21, 22, 23], rounds=0)


def test_greedy_per_head_on_a_real_campaign(direct_campaign, tmp_path):
    from ensemble import EnsemblePredictor, read_split, split_targets

    out = tmp_path / "gph"
    manifest = build_ensemble(direct_campaign.root, out,
                              BuildOptions(top_k=3, method="greedy-per-head", candidates=5, rounds=6))
    assert manifest.selection.per_head and manifest.selection.method == "greedy-per-head"
    assert len(manifest.members) <= 3
    for head in ("formation_energy", "stress", "forces"):
        weights = [m.head_weights[head] for m in manifest.members]
        assert sum(weights) == pytest.approx(1.0)
        assert all(abs(w * 6 - round(w * 6)) < 1e-12 for w in weights)
    # the predictor weights each head with its own weights: the validation MSE of every head is
    # no worse than that of the best single candidate (greedy's first pick is that candidate)
    predictor = EnsemblePredictor(out)
    graphs = read_split(direct_campaign.dataset, "valset")
    pred = predictor.predict_graphs(graphs)
    y = split_targets(graphs, predictor.heads)
    for head, hp in pred.heads.items():
        expected = np.array([m.head_weights[head] for m in manifest.members])
        np.testing.assert_allclose(hp.member_weights, expected / expected.sum())
        np.testing.assert_allclose(hp.mean, np.tensordot(hp.member_weights, hp.members, axes=1))
        # the spread: all members, with their overall weights, around the per-head mean
        u = np.array([m.weight for m in manifest.members])
        u = u / u.sum()
        spread = np.sqrt(np.tensordot(u, (hp.members - hp.mean[None]) ** 2, axes=1))
        np.testing.assert_allclose(hp.epistemic_std, spread, rtol=1e-6, atol=1e-12)
        best_single = min(float(np.mean((hp.members[k] - y[head]) ** 2)) for k in range(len(hp.members)))
        assert float(np.mean((hp.mean - y[head]) ** 2)) <= best_single * (1 + 1e-9)


def test_manifest_without_head_weights_reads_and_bad_head_weights_are_named(direct_ensemble, tmp_path):
    from ensemble import write_manifest

    manifest = read_manifest(direct_ensemble)  # written without per-head weights
    assert all(m.head_weights == {} for m in manifest.members)
    assert manifest.members[0].weight_for("stress") == manifest.members[0].weight
    copy = tmp_path / "ens"
    shutil.copytree(direct_ensemble, copy)
    for m in manifest.members:
        m.head_weights = {"stress": 0.0}
    write_manifest(copy, manifest)
    with pytest.raises(EnsembleIntegrityError, match="head 'stress''s weights sum to 0, not 1"):
        read_manifest(copy)
    manifest.members[1].head_weights = {"stress": -0.5}
    write_manifest(copy, manifest)
    with pytest.raises(EnsembleIntegrityError,
                       match=rf"member trial {manifest.members[1].trial_id}: head weights .* not finite and >= 0"):
        read_manifest(copy)


def test_bagged_per_head_selection_shares_weight_between_near_equal_candidates():
    from ensemble import greedy_per_head

    rng = np.random.default_rng(1)
    y = rng.normal(size=(60, 1))
    # three equally good candidates with independent errors and one poor one
    preds = {"e": np.stack([y + 0.3 * rng.normal(size=y.shape) for _ in range(3)] + [y + 2.0])}
    one = greedy_per_head(preds, {"e": y}, k=3, candidate_ids=[0, 1, 2, 3], rounds=1)
    assert len(one.trial_ids) == 1 and one.head_weights["e"] == [1.0]
    bagged = greedy_per_head(preds, {"e": y}, k=3, candidate_ids=[0, 1, 2, 3], rounds=1, bags=30, seed=0)
    assert sorted(bagged.trial_ids) == [0, 1, 2]
    assert sum(bagged.head_weights["e"]) == pytest.approx(1.0)
    assert min(bagged.head_weights["e"]) >= 0.05
    assert bagged.weights == pytest.approx(bagged.head_weights["e"])
    # the same seed gives the same weights; the cap keeps the k heaviest candidates
    again = greedy_per_head(preds, {"e": y}, k=3, candidate_ids=[0, 1, 2, 3], rounds=1, bags=30, seed=0)
    assert again.head_weights == bagged.head_weights
    capped = greedy_per_head(preds, {"e": y}, k=2, candidate_ids=[0, 1, 2, 3], rounds=1, bags=30, seed=0)
    assert len(capped.trial_ids) == 2 and sum(capped.head_weights["e"]) == pytest.approx(1.0)
    heaviest = sorted(range(3), key=lambda j: -bagged.head_weights["e"][j])[:2]
    assert sorted(capped.trial_ids) == sorted(bagged.trial_ids[j] for j in heaviest)
    with pytest.raises(SelectionError, match="bags must be >= 1, got 0"):
        greedy_per_head(preds, {"e": y}, k=2, candidate_ids=[0, 1, 2, 3], bags=0)


def test_select_cli_greedy_per_head(direct_campaign, tmp_path, capsys):
    from hydragnn_ensemble.cli import main

    out = tmp_path / "gph"
    rc = main(["select", str(direct_campaign.root), "--top-k", "2", "--method", "greedy-per-head",
               "--rounds", "4", "--bags", "3", "-o", str(out), "--no-progress"])
    assert rc == 0
    manifest = read_manifest(out)
    assert manifest.selection.method == "greedy-per-head" and len(manifest.members) <= 2
    for head in ("formation_energy", "stress", "forces"):
        assert sum(m.head_weights[head] for m in manifest.members) == pytest.approx(1.0)
    printed = capsys.readouterr().out
    assert f"formation_energy={manifest.members[0].head_weights['formation_energy']:.2f}" in printed
    assert main(["select", str(direct_campaign.root), "--method", "greedy-per-head", "--bags", "0",
                 "-o", str(tmp_path / "x")]) == 2
    assert "--bags must be >= 1, got 0" in capsys.readouterr().err


def test_stopped_trials_are_members_only_when_asked(direct_campaign, tmp_path, capsys):
    """A trial the campaign's stopper ended early is left out of the candidates (with the reason),
    unless ``include_stopped``."""
    import json
    import shutil

    from ensemble.campaign import read_campaign

    root = tmp_path / "campaign"
    shutil.copytree(direct_campaign.root, root)
    lines = (root / "journal.jsonl").read_text().splitlines()
    changed = []
    for line in lines:
        event = json.loads(line)
        if event.get("event") == "trial_finished" and event["trial_id"] == 3:
            event["result"]["status"] = "stopped"
            event["result"]["failure_reason"] = "early stopping (asha) after epoch 1: objective 0.1"
            event["result"]["objective"] = 1e-6  # the best reported objective: it would be a candidate
        changed.append(json.dumps(event))
    (root / "journal.jsonl").write_text("\n".join(changed) + "\n")
    result = json.loads((root / "trials" / "3" / "result.json").read_text())
    result["status"], result["objective"] = "stopped", 1e-6
    (root / "trials" / "3" / "result.json").write_text(json.dumps(result))
    default = read_campaign(root)
    assert 3 not in [t.trial_id for t in default.ranked()]
    assert default.trials[3].excluded_because.startswith("stopped early by the campaign's stopper")
    allowed = read_campaign(root, include_stopped=True)
    assert 3 in [t.trial_id for t in allowed.ranked()]
    # the CLI says it in one line, not one warning per stopped trial
    from hydragnn_ensemble.cli import main

    assert main(["select", str(root), "-o", str(tmp_path / "e"), "--top-k", "4", "--method", "topk",
                 "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "note: 1 trial(s) stopped early by the campaign's stopper are not candidates " \
           "(select --include-stopped to allow them); the best of them: 3 (" in err
    assert "warning: trial 3 " not in err
