"""Tests of the polycrystal dataset and its physics: Taylor factors and Hill-average moduli of Cu."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graph_builders.datasets._elastic import COPPER, youngs_modulus
from graph_builders.datasets._taylor import (
    bishop_hill_vertices,
    fcc_slip_systems,
    taylor_factor_linprog,
    taylor_factors,
)
from graph_builders.datasets.base import LabelledGraphs
from graph_builders.datasets.polycrystal import Texture, make_polycrystal_dataset
from graph_builders.mesoscale import GRAIN_FEATURES, matrix_to_quaternion, random_quaternions
from graph_builders.mesoscale.orientation import misorientation_angle
from graph_builders.schema import validate_graph


def orientation_with_z_along(direction: np.ndarray) -> np.ndarray:
    """A quaternion whose crystal ``direction`` points along sample z."""
    d = np.asarray(direction, dtype=float) / np.linalg.norm(direction)
    helper = np.array([1.0, 0, 0]) if abs(d[0]) < 0.9 else np.array([0, 1.0, 0])
    a = np.cross(helper, d)
    a /= np.linalg.norm(a)
    b = np.cross(d, a)
    crystal_to_sample_t = np.stack([a, b, d])  # rows: crystal vectors that map to sample x, y, z
    return matrix_to_quaternion(crystal_to_sample_t)


def test_fcc_slip_systems_and_bishop_hill_states():
    b, n = fcc_slip_systems()
    assert b.shape == n.shape == (12, 3)
    assert np.allclose((b * n).sum(1), 0.0)
    assert len(bishop_hill_vertices()) == 56
    # in the orthonormal deviatoric coordinates (tau_c = 1) the largest component is 2 sqrt(3)
    assert np.abs(bishop_hill_vertices()).max() == pytest.approx(2 * np.sqrt(3), rel=1e-9)


def test_vertex_enumeration_matches_linprog():
    quats = random_quaternions(40, np.random.default_rng(0))
    fast = taylor_factors(quats)
    reference = np.array([taylor_factor_linprog(q) for q in quats])
    assert np.abs(fast - reference).max() < 1e-7


def test_taylor_factor_textbook_values():
    quats = random_quaternions(20000, np.random.default_rng(1))
    assert taylor_factors(quats).mean() == pytest.approx(3.06, abs=0.1)
    special = np.array([orientation_with_z_along(d) for d in ([0, 0, 1], [1, 1, 1], [1, 1, 0])])
    # <100>: sqrt(6) = 2.449; <111>: 3.674; <110>: 3.674
    assert taylor_factors(special) == pytest.approx([np.sqrt(6), 3 * np.sqrt(6) / 2, 3 * np.sqrt(6) / 2],
                                                    abs=1e-9)


def test_youngs_modulus_of_copper():
    s11, s12, s44 = COPPER.compliances()
    along = {d: orientation_with_z_along(d)[None] for d in [(0, 0, 1), (1, 1, 1)]}
    e100 = youngs_modulus(along[(0, 0, 1)], [1.0])
    e111 = youngs_modulus(along[(1, 1, 1)], [1.0])
    assert e100.voigt == pytest.approx(1 / s11) and e100.reuss == pytest.approx(1 / s11)
    assert e100.hill == pytest.approx(66.69, abs=0.01)
    assert e111.hill == pytest.approx(1 / (s11 - 2 * (s11 - s12 - s44 / 2) / 3), rel=1e-9)
    assert e111.hill == pytest.approx(191.1, abs=0.1)
    random = youngs_modulus(random_quaternions(20000, np.random.default_rng(2)), np.ones(20000))
    assert random.hill == pytest.approx(127.0, abs=5.0)
    assert random.voigt == pytest.approx(144.75, abs=1.0) and random.reuss == pytest.approx(109.5, abs=1.0)


def test_textures_are_what_they_say():
    rng = np.random.default_rng(3)
    cube = Texture("cube", spread=np.deg2rad(5)).sample(500, rng)
    identity = np.tile([1.0, 0, 0, 0], (500, 1))
    assert np.rad2deg(np.median(misorientation_angle(cube, identity))) < 15.0
    fibre = Texture("fibre", spread=0.0).sample(200, rng)
    # crystal <111> along z exactly: Taylor factor of the <111> fibre
    assert taylor_factors(fibre) == pytest.approx(np.full(200, 3 * np.sqrt(6) / 2), abs=1e-9)


@pytest.fixture(scope="module")
def small_dataset() -> LabelledGraphs:
    return make_polycrystal_dataset(num_samples=12, grains=(20, 30), seed=5, progress=False)


def test_dataset_contract(small_dataset):
    ds = small_dataset
    assert ds.name == "polycrystal" and ds.splits is None
    assert [(h.name, h.level, h.dim, h.unit) for h in ds.heads] == [
        ("taylor_factor", "node", 1, ""), ("mean_taylor_factor", "graph", 1, ""),
        ("youngs_modulus", "graph", 1, "GPa")]
    assert len(ds.graphs) == 12 and len({g.name for g in ds.graphs}) == 12
    for g in ds.graphs:
        validate_graph(g, ds.heads, g.name)
        assert 20 <= g.num_nodes <= 30
        assert g.pbc.tolist() == [[True, True, True]]
        volume = g.x[:, GRAIN_FEATURES.index("volume")].double()
        assert float(volume.sum()) == pytest.approx(g.num_nodes, rel=1e-5)  # unit mean grain volume
        weighted = float((volume * g.y_taylor_factor[:, 0].double()).sum() / volume.sum())
        assert float(g.y_mean_taylor_factor) == pytest.approx(weighted, rel=1e-5)
        q = g.x[:, 3:7].double().numpy()
        assert np.allclose(g.y_taylor_factor[:, 0].numpy(), taylor_factors(q), atol=1e-4)
    assert ds.metadata["c44_gpa"] == 75.4


def test_mixed_texture_targets_vary_and_stay_physical(small_dataset):
    modulus = np.array([float(g.y_youngs_modulus) for g in small_dataset.graphs])
    taylor = np.array([float(g.y_mean_taylor_factor) for g in small_dataset.graphs])
    assert modulus.min() > 66.6 and modulus.max() < 191.2  # between the <100> and <111> single crystals
    assert taylor.min() >= np.sqrt(6) - 1e-6 and taylor.max() <= 3.68
    assert modulus.std() > 5.0 and taylor.std() > 0.05


def test_random_texture_dataset_mean_modulus():
    ds = make_polycrystal_dataset(num_samples=8, grains=(40, 50), texture="random", seed=1, progress=False)
    modulus = np.mean([float(g.y_youngs_modulus) for g in ds.graphs])
    taylor = np.mean([float(g.y_mean_taylor_factor) for g in ds.graphs])
    assert modulus == pytest.approx(127.0, abs=8.0)
    assert taylor == pytest.approx(3.06, abs=0.15)


def test_dataset_is_reproducible(small_dataset):
    again = make_polycrystal_dataset(num_samples=3, grains=(20, 30), seed=5, progress=False)
    other = make_polycrystal_dataset(num_samples=3, grains=(20, 30), seed=6, progress=False)
    for a, b in zip(again.graphs, small_dataset.graphs[:3]):  # sample k depends only on (seed, k)
        assert a.name == b.name
        assert torch.equal(a.x, b.x) and torch.equal(a.edge_index, b.edge_index)
        assert torch.equal(a.y_youngs_modulus, b.y_youngs_modulus)
    assert not torch.equal(other.graphs[0].pos[:3], again.graphs[0].pos[:3])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_samples": 0}, "num_samples must be >= 1"),
        ({"grains": (30, 20)}, r"grains must be \(low, high\)"),
        ({"texture": "goss"}, "unknown texture 'goss'"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_polycrystal_dataset(progress=False, **kwargs)
