"""The uncertainty model's parts on known data: term weights recovered by the validation fit, the
input domain's checks on real structures, latent distances, diverse selection."""

from __future__ import annotations

import numpy as np
import pytest
from ase.build import bulk, fcc111

from ensemble import (
    HeadUncertainty,
    InputDomain,
    LatentReference,
    diverse_selection,
    fit_head,
)
from ensemble.uncertainty import TermInputs, combine_terms
from graph_builders.atomic import atoms_to_graph
from graph_builders.datasets.alloy import generate_alloy_structures
from graph_builders.datasets.alloy_structures import RANDOM_ONLY


def _inputs(n: int, spread: np.ndarray, distance: np.ndarray | None = None, outside=None, share=None, strain=None):
    return TermInputs(spread[:, None] ** 2, None, distance, share, outside, strain)


def test_fit_recovers_the_factor_of_an_overconfident_spread():
    rng = np.random.default_rng(0)
    spread = rng.uniform(0.5, 2.0, 20000)
    errors = (rng.normal(size=20000) * 3.0 * spread)[:, None]  # the spread is 3x too small
    model = fit_head(_inputs(20000, spread), errors, None)
    assert model.weights == {"epistemic": pytest.approx(9.0, rel=0.03)}
    std = combine_terms(model, _inputs(5, np.ones(5))).std
    np.testing.assert_allclose(std, 3.0, rtol=0.02)


def test_fit_finds_a_distance_driven_error_and_the_parts_add_up():
    rng = np.random.default_rng(1)
    n = 20000
    spread = np.full(n, 1e-3)  # members agree...
    distance = rng.uniform(0.5, 3.0, n)  # ...but the error grows with the latent distance beyond 1
    errors = (rng.normal(size=n) * 0.1 * np.maximum(distance, 1.0))[:, None]
    model = fit_head(_inputs(n, spread, distance), errors, None, group_score=None)  # the terms alone
    unit = float(np.mean(errors ** 2))
    assert model.weights["distance"] * unit == pytest.approx(0.01, rel=0.05)
    assert model.weights["epistemic"] < 1.0  # the spread explains nothing
    logs = np.log(distance)
    assert model.distance_limit == pytest.approx(np.exp(logs.mean() + 2.3263 * logs.std()), rel=1e-4)
    far = combine_terms(model, _inputs(3, np.full(3, 1e-3), np.array([0.0, 1.0, 10.0])))
    assert far.std[2, 0] / far.std[1, 0] == pytest.approx(10.0, rel=0.01)
    assert far.std[0, 0] == pytest.approx(far.std[1, 0])  # a training input keeps the error level
    np.testing.assert_allclose(sum(p ** 2 for p in far.parts.values()), far.std ** 2)


def test_out_of_domain_rule_and_old_std_scales():
    model = HeadUncertainty(weights={"epistemic": 4.0}, prior_variance=[0.25], distance_limit=2.0)
    inputs = _inputs(4, np.ones(4), distance=np.array([1.0, 3.0, 1.0, 1.0]),
                     outside=np.array([False, False, False, True]), share=np.array([0.0, 0.0, 0.05, 0.8]))
    out = combine_terms(model, inputs)
    # in: 2 x spread; beyond the latent limit: spread inflated by d=3 and the whole prior (0.5);
    # a weight s outside (atoms outside, broken bonds): + (0.5 s)^2, whether or not the row is flagged
    np.testing.assert_allclose(out.std[:, 0], np.sqrt([4.0, 36.0 + 0.25, 4.0 + 0.25 * 0.05 ** 2,
                                                       4.0 + 0.25 * 0.8 ** 2]))
    np.testing.assert_allclose(out.parts["domain"][:, 0], [0.0, 0.5, 0.025, 0.4])
    old = HeadUncertainty.from_scale(1.5)
    np.testing.assert_allclose(combine_terms(old, _inputs(3, np.ones(3))).std, 1.5)


def test_strain_term_is_the_fitted_change_beyond_the_training_range():
    """Targets quadratic in two strain descriptors (plus a composition offset): the fitted term is
    0 inside the training ranges and, outside them, the change along the curve's tangent at the
    nearer edge."""
    from ensemble.uncertainty import fit_strain_response

    rng = np.random.default_rng(4)
    r = rng.uniform(-0.03, 0.03, 400)
    shape = rng.uniform(0.0, 0.02, 400)
    composition = rng.dirichlet(np.ones(3), 400)
    y = (composition @ np.array([0.1, -0.2, 0.05]) + 2.0 * r + 50.0 * r * r + 30.0 * shape ** 2)[:, None]
    coef, ranges = fit_strain_response(np.stack([r, shape], axis=1), composition, y)
    np.testing.assert_allclose(coef, [[[2.0, 50.0], [0.0, 30.0]]], atol=1e-6)
    model = HeadUncertainty(weights={"epistemic": 1.0}, strain_coef=coef, strain_range=ranges)
    test = np.array([[0.0, 0.01], [ranges[0][1], 0.01], [0.06, 0.01], [-0.06, 0.01], [0.0, 0.05], [np.nan, np.nan]])
    out = combine_terms(model, _inputs(6, np.full(6, 1e-3), strain=test))
    delta = lambda x, e, b, c: (b + 2 * c * e) * (x - e)  # noqa: E731  (the tangent at the edge)
    np.testing.assert_allclose(out.parts["strain"][:, 0], [
        0.0, 0.0, abs(delta(0.06, ranges[0][1], 2.0, 50.0)), abs(delta(-0.06, ranges[0][0], 2.0, 50.0)),
        abs(delta(0.05, ranges[1][1], 0.0, 30.0)), 0.0], atol=1e-6)


def test_a_model_stored_with_the_retired_composition_term_reads_and_weighs_unseen_atoms_as_outside():
    """The composition term is retired: a stored model with its numbers reads, gets no composition
    part, and its unseen-element atoms (a quarter of the second row, each weighing 1) are in the
    out-of-domain term: std^2 = spread^2 + prior_variance x 0.25^2."""
    model = HeadUncertainty.model_validate({"weights": {"epistemic": 1.0}, "prior_variance": [0.04],
                                            "composition_coef": [[0.1, -0.2, 0.05, 0.3, -0.1, 0.5]],
                                            "composition_residual_variance": [1e-4]})
    inputs = TermInputs(np.full((2, 1), 1e-6), None, None, np.array([0.0, 0.25]), np.array([False, True]))
    out = combine_terms(model, inputs)
    assert "composition" not in out.parts
    np.testing.assert_allclose(out.std[:, 0], np.sqrt([1e-6, 1e-6 + 0.04 * 0.25 ** 2]))


def test_domain_check_counts_each_structure_s_training_and_unseen_elements():
    domain = InputDomain.fit(_fcc_training_graphs(), 5.0)
    pt = bulk("Cu", "fcc", a=3.65, cubic=True).repeat(2)
    pt.numbers[:8] = 78  # 8 Pt of 32
    pt.numbers[8:16] = 79
    check = domain.check([atoms_to_graph(pt, cutoff=5.0), _fcc_training_graphs(1)[0]])
    fractions, unseen = check.composition(np.array([0, 32, 64]))
    np.testing.assert_allclose(fractions[0], [0.0, 0.5, 0.25])  # Ni, Cu, Au
    np.testing.assert_allclose(unseen, [0.25, 0.0])
    assert fractions[1].sum() == pytest.approx(1.0)
    weight = check.node_outside_weight
    assert weight[:8].min() >= 1.0


def test_an_envelope_reason_names_what_its_atoms_failed_never_an_empty_list():
    """8 Pt atoms (an element the training never saw) in a 32-atom cell of the training lattice:
    the atoms are outside for their element alone, and the envelope reason says so (it once read
    ``8 of 32 atom(s) outside the training envelope: `` with nothing after the colon)."""
    domain = InputDomain.fit(_fcc_training_graphs(), 5.0)
    cell = bulk("Cu", "fcc", a=3.65, cubic=True).repeat(2)
    cell.numbers[:8] = 78
    vacancy = bulk("Cu", "fcc", a=3.61, cubic=True).repeat(2)
    del vacancy[5]
    check = domain.check([atoms_to_graph(a, cutoff=5.0) for a in (cell, vacancy)])
    assert check.reasons[0] == ["element(s) Pt not in the training data",
                                "8 of 32 atom(s) outside the training envelope: 8 of element(s) Pt the training never saw"]
    for reasons in check.reasons:
        for reason in reasons:
            assert not reason.rstrip().endswith(":") and ": ;" not in reason and not reason.endswith("; ")


def _fcc_training_graphs(n: int = 30) -> list:
    structures, _ = generate_alloy_structures(n, elements=("Cu", "Ni", "Au"), components=(2, 3), sizes=(32,),
                                              seed=3)
    return [atoms_to_graph(a, cutoff=5.0) for a in structures]


def test_input_domain_flags_vacancies_surfaces_other_lattices_and_new_elements():
    domain = InputDomain.fit(_fcc_training_graphs(), 5.0)
    assert domain.elements == [28, 29, 79] and domain.shell_low[0] == domain.shell_high[0] == 12
    cu = bulk("Cu", "fcc", a=3.61, cubic=True).repeat(2)
    new_mix = cu.copy()
    new_mix.symbols[::3] = "Ni"
    vacancy = cu.copy()
    del vacancy[5]
    slab = fcc111("Cu", size=(3, 4, 5), a=3.61, vacuum=10.0, orthogonal=True)
    bcc = bulk("Cu", "bcc", a=2.87, cubic=True).repeat(3)
    platinum = cu.copy()
    platinum.symbols[0] = "Pt"
    graphs = [atoms_to_graph(a, cutoff=5.0) for a in (new_mix, vacancy, slab, bcc, platinum)]
    check = domain.check(graphs)
    assert check.reasons[0] == []  # a new composition of the same lattice is inside
    assert check.reasons[1][0].startswith("15 of 31 atom(s) outside the training envelope: 15 with neighbour shells")
    assert "with neighbour shells outside the training envelope" in check.reasons[2][0]
    assert check.reasons[3] and check.reasons[4] == ["element(s) Pt not in the training data"]
    ptr = np.cumsum([0] + [g.num_nodes for g in graphs])
    excess = check.graph_excess(ptr)
    assert excess[0] == 0 and 0 < excess[1] < excess[2] < excess[3]
    assert check.node_unknown[ptr[4]] and not check.node_unknown[ptr[4] + 1:].any()
    # the vacancy's 12 neighbours miss one nearest neighbour each (a broken bond: weight 2 each)
    deficit = check.node_deficit[ptr[1]:ptr[2]]
    assert sorted(deficit.tolist()) == [0.0] * 19 + [1.0] * 12
    assert check.outside_weight(ptr)[1] == pytest.approx(check.node_outside_weight[ptr[1]:ptr[2]].mean())


def test_uniform_strain_is_outside_and_one_edge_atom_does_not_flag_a_large_cell():
    """The shells are scale-free; the scale check is not: a cell stretched 8% or compressed 10% is
    outside, most atoms of it, and so is a cell sheared 15% (its first shell spreads beyond the
    training cells'); the training cells span -5.6% to +4.1% around Vegard's law (random
    strains up to 3% per component, relaxed cells and ordered phases at their EMT volume). A 256-atom
    cell with one atom pushed to the envelope's edge is inside; its share outside is 1/256."""
    structures, _ = generate_alloy_structures(40, elements=("Cu", "Ni", "Au"), components=(2, 3), sizes=(32,),
                                              seed=3)
    domain = InputDomain.fit([atoms_to_graph(a, cutoff=5.0) for a in structures], 5.0)
    assert len(domain.scale_coef) == 3 and domain.strain_low[0] < 0 < domain.strain_high[0]
    fresh, _ = generate_alloy_structures(6, elements=("Cu", "Ni", "Au"), components=(2, 3), sizes=(32,),
                                         seed=11, mix=RANDOM_ONLY)
    graphs = [atoms_to_graph(a, cutoff=5.0) for a in fresh]
    for factor in (1.08, 0.90):
        strained = fresh[0].copy()
        strained.set_cell(strained.cell.array * factor, scale_atoms=True)
        graphs.append(atoms_to_graph(strained, cutoff=5.0))
    sheared = fresh[1].copy()
    sheared.set_cell(sheared.cell.array @ (np.eye(3) + 0.15 * np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]])),
                     scale_atoms=True)
    graphs.append(atoms_to_graph(sheared, cutoff=5.0))
    big, _ = generate_alloy_structures(1, elements=("Cu", "Ni", "Au"), components=(2, 2), sizes=(256,), seed=5,
                                       mix=RANDOM_ONLY)
    lone = big[0].copy()
    lone.positions[0] += [0.45, 0.0, 0.0]  # one atom far off its site
    graphs.append(atoms_to_graph(lone, cutoff=5.0))
    check = domain.check(graphs)
    ptr = np.cumsum([0] + [g.num_nodes for g in graphs])
    share = check.outside_fraction(ptr)
    assert all(r == [] for r in check.reasons[:6])  # fresh cells of the training generator: inside
    for g in (6, 7):  # the atoms' rattle leaves a few within one sd of the range's end
        assert share[g] > 0.5 and "nearest-neighbour distances" in check.reasons[g][0]
    strain = check.graph_strain(ptr)
    assert strain[6, 0] > domain.strain_high[0] and strain[7, 0] < domain.strain_low[0]
    assert strain[8, 1] > domain.strain_high[1] and "first shell distorted" in check.reasons[8][0]
    # compression (squared strain of the bonds shorter than expected): stretching shortens none,
    # a 10% compression every one (12 bonds at log(0.9) from a cell ~2% above Vegard: 0.08 per
    # atom), a shear some; fresh cells stay within the training's
    assert strain[6, 2] == 0.0 and strain[7, 2] > 3 * domain.strain_high[2]
    assert strain[8, 2] > domain.strain_high[2] and "bonds compressed" in check.reasons[8][0]
    assert (strain[:6, 2] < domain.strain_high[2]).all()
    assert check.reasons[9] == [] and 0 < share[9] <= 13 / 256  # the atom and at most its 12 neighbours


def test_latent_distance_is_one_inside_and_grows_outside():
    rng = np.random.default_rng(2)
    nodes_per_graph, graphs = 20, 200
    features = rng.normal(size=(nodes_per_graph * graphs, 16))
    z = rng.choice([28, 29], size=len(features))
    index = np.repeat(np.arange(graphs), nodes_per_graph)
    ref = LatentReference.fit(features, z, index, graphs)
    new = rng.normal(size=(nodes_per_graph * 10, 16))
    near = ref.distances(new, rng.choice([28, 29], size=len(new)), np.repeat(np.arange(10), nodes_per_graph), 10)
    assert 0.7 < np.median(near.node) < 1.3 and 0.5 < np.median(near.graph) < 2.0
    far = ref.distances(new + 6.0, rng.choice([28, 29], size=len(new)), np.repeat(np.arange(10), nodes_per_graph), 10)
    assert np.median(far.node) > 3 * np.median(near.node) and np.min(far.graph) > 3 * np.max(near.graph)
    again = LatentReference.from_arrays(ref.to_arrays("m/"), "m/")
    np.testing.assert_array_equal(again.distances(new, np.full(len(new), 29), np.zeros(len(new), int), 1).node,
                                  ref.distances(new, np.full(len(new), 29), np.zeros(len(new), int), 1).node)


def test_diverse_selection_prefers_members_whose_errors_differ():
    rng = np.random.default_rng(3)
    y = rng.normal(size=(400, 1))
    noise = rng.normal(size=(400, 1)) * 0.3
    best = y + noise
    near_copy = best + rng.normal(size=(400, 1)) * 0.02  # a seed of the same model: the same errors
    different = y + rng.normal(size=(400, 1)) * 0.35  # errors of about the same size, elsewhere
    preds = {"e": np.stack([best, near_copy, different])}
    chosen = diverse_selection(preds, {"e": y}, k=4, candidate_ids=[10, 11, 12])
    # the first pick is one of the two copies (lowest error); the second is the model that errs
    # elsewhere, where ranking by error would take the other copy
    assert chosen.trial_ids[0] in (10, 11) and chosen.trial_ids[1] == 12
    assert sum(chosen.weights) == pytest.approx(1.0)


def test_the_registry_is_the_list_of_terms_a_model_uses() -> None:
    """Every registered term is built from a model that has what it needs; none otherwise."""
    from ensemble.uncertainty import UNCERTAINTY_TERMS, HeadUncertainty

    full = HeadUncertainty(weights={"epistemic": 1.0}, distance_unit_variance=[0.1], prior_variance=[2.0],
                           distance_limit=3.0)
    assert [t.name for t in full.terms()] == ["epistemic", "aleatoric", "distance", "domain"]
    assert list(UNCERTAINTY_TERMS) == ["epistemic", "aleatoric", "distance", "domain", "strain"]
    scaled = full.model_copy(update={"strain_coef": [[[1.0, 2.0], [0.0, 1.0]]], "strain_range": [[-0.01, 0.01], [0, 0.02]],
                                     "composition_coef": [[0.0, 0.0, 0.1]], "composition_residual_variance": [1e-4]})
    assert [t.name for t in scaled.terms()] == list(UNCERTAINTY_TERMS)
    bare = HeadUncertainty(weights={"epistemic": 1.0})
    assert [t.name for t in bare.terms()] == ["epistemic", "aleatoric"]
