"""Taylor factor of FCC grains ({111}<110> slip) for an imposed isochoric strain.

The Taylor factor is ``M = min sum_s |gamma_s| / eps`` over slip shears ``gamma`` that produce the
imposed strain (here uniaxial tension along the sample axis: eps = diag(-1/2, -1/2, 1) in the sample
frame, rotated into the crystal frame). This is a linear programme; its dual is
``M = max sigma : D`` over the single-crystal yield polytope ``|sigma : P_s| <= 1`` (P_s = Schmid
tensors). :func:`taylor_factors` evaluates the dual at the polytope's vertices (the 56 Bishop-Hill stress
states, enumerated once) for all grains at once; :func:`taylor_factor_linprog` solves the primal with
scipy's HiGHS and serves as the reference.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
from scipy.optimize import linprog

from graph_builders.mesoscale.orientation import quaternion_to_matrix

#: Uniaxial tension along sample z, isochoric.
TENSION_Z = np.diag([-0.5, -0.5, 1.0])


def deviatoric_basis() -> np.ndarray:
    """Five Frobenius-orthonormal symmetric traceless 3x3 tensors [5, 3, 3]."""
    b = np.zeros((5, 3, 3))
    b[0] = np.diag([1.0, -1.0, 0.0]) / np.sqrt(2.0)
    b[1] = np.diag([1.0, 1.0, -2.0]) / np.sqrt(6.0)
    for k, (i, j) in enumerate([(0, 1), (0, 2), (1, 2)], start=2):
        b[k, i, j] = b[k, j, i] = 1.0 / np.sqrt(2.0)
    return b


def fcc_slip_systems() -> tuple[np.ndarray, np.ndarray]:
    """The 12 {111}<110> slip systems as unit (direction [12, 3], plane normal [12, 3])."""
    normals = np.array([[1, 1, 1], [-1, 1, 1], [1, -1, 1], [1, 1, -1]], dtype=float) / np.sqrt(3.0)
    directions = np.array([[1, -1, 0], [1, 0, -1], [0, 1, -1], [1, 1, 0], [1, 0, 1], [0, 1, 1]],
                          dtype=float) / np.sqrt(2.0)
    pairs = [(d, n) for n in normals for d in directions if abs(d @ n) < 1e-12]
    return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])


def schmid_matrix() -> np.ndarray:
    """[12, 5]: deviatoric-basis coordinates of each slip system's symmetric Schmid tensor."""
    b, n = fcc_slip_systems()
    schmid = 0.5 * (np.einsum("si,sj->sij", b, n) + np.einsum("si,sj->sij", n, b))
    return np.einsum("sij,kij->sk", schmid, deviatoric_basis())


@functools.lru_cache(maxsize=1)
def bishop_hill_vertices() -> np.ndarray:
    """Vertices [V, 5] of the FCC yield polytope |sigma . schmid_s| <= 1 (deviatoric coordinates).

    Enumerated from every choice of 5 active slip systems and signs; FCC gives the 56 Bishop-Hill
    stress states.
    """
    schmid = schmid_matrix()
    combos = np.array(list(itertools.combinations(range(len(schmid)), 5)))
    mats = schmid[combos]  # [C, 5, 5]
    regular = np.abs(np.linalg.det(mats)) > 1e-9
    mats = mats[regular]
    signs = np.array(list(itertools.product((-1.0, 1.0), repeat=5)))  # [32, 5]
    sigma = np.einsum("cij,sj->csi", np.linalg.inv(mats), signs).reshape(-1, 5)
    feasible = (np.abs(sigma @ schmid.T) <= 1.0 + 1e-9).all(axis=1)
    rounded = np.round(sigma[feasible], 9)
    vertices = np.unique(rounded, axis=0)
    vertices.setflags(write=False)
    return vertices


def crystal_strain(quaternions: np.ndarray, strain: np.ndarray = TENSION_Z) -> np.ndarray:
    """Sample-frame strain rotated into each crystal frame, in deviatoric coordinates [G, 5]."""
    rot = quaternion_to_matrix(np.atleast_2d(quaternions))  # crystal -> sample
    local = np.einsum("gai,ab,gbj->gij", rot, strain, rot)  # R^T D R
    return np.einsum("gij,kij->gk", local, deviatoric_basis())


def taylor_factors(quaternions: np.ndarray, strain: np.ndarray = TENSION_Z) -> np.ndarray:
    """Taylor factor [G] of each orientation (quaternions [G, 4]) for ``strain`` (von Mises eps = 1
    for the default uniaxial tension)."""
    return (crystal_strain(quaternions, strain) @ bishop_hill_vertices().T).max(axis=1)


def taylor_factor_linprog(quaternion: np.ndarray, strain: np.ndarray = TENSION_Z) -> float:
    """Reference: the Taylor factor of one orientation by linear programming (HiGHS)."""
    target = crystal_strain(np.asarray(quaternion)[None], strain)[0]
    schmid = schmid_matrix().T  # [5, 12]
    a_eq = np.hstack([schmid, -schmid])  # gamma = gamma_plus - gamma_minus
    result = linprog(np.ones(24), A_eq=a_eq, b_eq=target, bounds=(0, None), method="highs")
    if not result.success:
        raise RuntimeError(f"Taylor LP failed: {result.message}")
    return float(result.fun)
