"""Voigt, Reuss and Hill averages of the Young's modulus of a cubic polycrystal along a sample axis."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graph_builders.mesoscale.orientation import quaternion_to_matrix


@dataclass(frozen=True)
class CubicElastic:
    """Cubic single-crystal stiffness constants (GPa)."""

    c11: float
    c12: float
    c44: float

    def compliances(self) -> tuple[float, float, float]:
        """(S11, S12, S44) in 1/GPa."""
        denom = (self.c11 - self.c12) * (self.c11 + 2.0 * self.c12)
        return (self.c11 + self.c12) / denom, -self.c12 / denom, 1.0 / self.c44


COPPER = CubicElastic(c11=168.4, c12=121.4, c44=75.4)
_VOIGT_PAIRS = [(0, 0), (1, 1), (2, 2), (1, 2), (0, 2), (0, 1)]


@dataclass(frozen=True)
class YoungsModulus:
    """Young's modulus averages (GPa) along the load axis."""

    voigt: float
    reuss: float

    @property
    def hill(self) -> float:
        return 0.5 * (self.voigt + self.reuss)


def youngs_modulus(quaternions: np.ndarray, weights: np.ndarray, crystal: CubicElastic = COPPER,
                   axis: int = 2) -> YoungsModulus:
    """Voigt (mean stiffness) and Reuss (mean compliance) Young's modulus along sample ``axis`` of grains
    with orientations [G, 4] (crystal -> sample) and volume ``weights`` [G]."""
    w = np.asarray(weights, dtype=np.float64)
    w = w / w.sum()
    rot = quaternion_to_matrix(np.atleast_2d(quaternions))  # columns: crystal axes in the sample frame
    # Reuss: directional compliance 1/E(d) = S11 - 2 (S11 - S12 - S44/2)(d1^2 d2^2 + d2^2 d3^2 + d3^2 d1^2)
    s11, s12, s44 = crystal.compliances()
    d2 = rot[:, axis, :] ** 2  # squared crystal components of the load axis
    mix = d2[:, 0] * d2[:, 1] + d2[:, 1] * d2[:, 2] + d2[:, 2] * d2[:, 0]
    reuss = 1.0 / float(w @ (s11 - 2.0 * (s11 - s12 - 0.5 * s44) * mix))
    # Voigt: C = c12 dd + c44 (dd + dd) + (c11 - c12 - 2 c44) sum_k r_k r_k r_k r_k, averaged
    eye = np.eye(3)
    iso = (crystal.c12 * np.einsum("ij,kl->ijkl", eye, eye)
           + crystal.c44 * (np.einsum("ik,jl->ijkl", eye, eye) + np.einsum("il,jk->ijkl", eye, eye)))
    aniso = np.einsum("g,gik,gjk,glk,gmk->ijlm", w, rot, rot, rot, rot)
    stiffness = iso + (crystal.c11 - crystal.c12 - 2.0 * crystal.c44) * aniso
    voigt_matrix = np.array([[stiffness[a + b] for b in _VOIGT_PAIRS] for a in _VOIGT_PAIRS])
    compliance = np.linalg.inv(voigt_matrix)
    return YoungsModulus(voigt=1.0 / float(compliance[axis, axis]), reuss=reuss)
