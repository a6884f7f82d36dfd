"""Built-in polycrystal dataset: periodic Voronoi grains of FCC copper with Taylor-factor and stiffness
targets.

Each sample is a periodic cube of G grains (G drawn uniformly from ``grains``) with uniformly random
seeds; lengths are in units of the mean grain size (the box holds G unit volumes). Orientations follow
the sample's texture. Targets, for uniaxial tension along sample z:

* ``taylor_factor`` (node): per-grain Taylor factor, {111}<110> slip, full constraints
  (random-texture mean 3.06);
* ``mean_taylor_factor`` (graph): volume-weighted mean of the grains' Taylor factors;
* ``youngs_modulus`` (graph, GPa): Hill average (mean of Voigt and Reuss, volume-weighted) of the
  Young's modulus of Cu (C11 = 168.4, C12 = 121.4, C44 = 75.4 GPa) along z (random texture: 127 GPa).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm

from graph_builders.datasets._elastic import COPPER, youngs_modulus
from graph_builders.datasets._taylor import taylor_factors
from graph_builders.datasets.base import LabelledGraphs
from graph_builders.mesoscale.builder import GRAIN_FEATURES, grains_to_graph
from graph_builders.mesoscale.orientation import (
    canonical_hemisphere,
    quaternion_multiply,
    random_quaternions,
    rotation_vector_to_quaternion,
)
from graph_builders.schema import HeadRegistry, HeadSpec

TEXTURES = ("random", "cube", "fibre", "mixed")
#: Orientation spread (radians, standard deviation of each rotation-vector component) of "cube"/"fibre".
DEFAULT_SPREAD = np.deg2rad(10.0)
HEADS = HeadRegistry.of([
    HeadSpec("taylor_factor", "node", 1, "", "Taylor factor of the grain, uniaxial tension along z"),
    HeadSpec("mean_taylor_factor", "graph", 1, "", "volume-weighted mean Taylor factor"),
    HeadSpec("youngs_modulus", "graph", 1, "GPa", "Hill-average Young's modulus along z"),
])


@dataclass(frozen=True)
class Texture:
    """How one sample's orientations are drawn: ``kind`` ("random", "cube" or "fibre" = <111> || z),
    Gaussian spread around the ideal orientation (radians) and the fraction of random grains."""

    kind: str
    spread: float = DEFAULT_SPREAD
    random_fraction: float = 0.0

    def sample(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """``count`` orientations (unit quaternions [count, 4], w >= 0)."""
        uniform = random_quaternions(count, rng)
        if self.kind == "random":
            return uniform
        if self.kind == "cube":
            ideal = np.tile([1.0, 0.0, 0.0, 0.0], (count, 1))
        elif self.kind == "fibre":  # crystal <111> along sample z, any rotation about z
            about_z = rotation_vector_to_quaternion(
                np.outer(rng.uniform(0.0, 2.0 * np.pi, count), [0.0, 0.0, 1.0]))
            tilt_axis = np.cross([1.0, 1.0, 1.0], [0.0, 0.0, 1.0])
            tilt = np.arccos(1.0 / np.sqrt(3.0)) * tilt_axis / np.linalg.norm(tilt_axis)
            ideal = quaternion_multiply(about_z, rotation_vector_to_quaternion(tilt))
        else:
            raise ValueError(f"unknown texture kind {self.kind!r}; expected one of {TEXTURES[:3]}")
        scatter = rotation_vector_to_quaternion(rng.normal(0.0, self.spread, (count, 3)))
        textured = quaternion_multiply(scatter, ideal)
        pick_random = rng.random(count) < self.random_fraction
        return canonical_hemisphere(np.where(pick_random[:, None], uniform, textured))


def draw_texture(texture: str, rng: np.random.Generator) -> Texture:
    """The texture of one sample; "mixed" draws the kind, a spread of 5-40 degrees and up to half
    random grains, so that the targets vary from sample to sample."""
    if texture == "mixed":
        return Texture(kind=str(rng.choice(TEXTURES[:3])), spread=float(np.deg2rad(rng.uniform(5.0, 40.0))),
                       random_fraction=float(rng.uniform(0.0, 0.5)))
    if texture not in TEXTURES:
        raise ValueError(f"unknown texture {texture!r}; expected one of {TEXTURES}")
    return Texture(kind=texture)


def make_polycrystal_dataset(num_samples: int = 200, grains: tuple[int, int] = (20, 60),
                             texture: str = "mixed", seed: int = 0, progress: bool = True
                             ) -> LabelledGraphs:
    """``num_samples`` periodic Voronoi polycrystals of Cu with Taylor-factor and Young's-modulus targets.

    Reproducible: sample k depends only on (seed, k). Node features follow
    :data:`graph_builders.mesoscale.GRAIN_FEATURES`.
    """
    low, high = int(grains[0]), int(grains[1])
    if num_samples < 1:
        raise ValueError(f"num_samples must be >= 1, got {num_samples}")
    if not 2 <= low <= high:
        raise ValueError(f"grains must be (low, high) with 2 <= low <= high, got {grains}")
    if texture not in TEXTURES:
        raise ValueError(f"unknown texture {texture!r}; expected one of {TEXTURES}")
    streams = np.random.SeedSequence(seed).spawn(num_samples)
    graphs = []
    for index in tqdm(range(num_samples), desc="polycrystal", disable=not progress):
        rng = np.random.default_rng(streams[index])
        count = int(rng.integers(low, high + 1))
        box = np.full(3, count ** (1.0 / 3.0))
        seeds = rng.random((count, 3)) * box
        sample_texture = draw_texture(texture, rng)
        quats = sample_texture.sample(count, rng)
        name = f"polycrystal_{index:04d}_{sample_texture.kind}_{count}g"
        data = grains_to_graph(seeds, box, orientations=quats, periodic=True, name=name)
        volume = data.x[:, GRAIN_FEATURES.index("volume")].double().numpy()
        taylor = taylor_factors(quats)
        modulus = youngs_modulus(quats, volume, COPPER, axis=2)
        data.y_taylor_factor = _column(taylor)
        data.y_mean_taylor_factor = _column([float(volume @ taylor / volume.sum())])
        data.y_youngs_modulus = _column([modulus.hill])
        graphs.append(data)
    metadata: dict[str, str | int | float] = {
        "material": "Cu (FCC)", "c11_gpa": COPPER.c11, "c12_gpa": COPPER.c12, "c44_gpa": COPPER.c44,
        "load": "uniaxial tension along z", "slip_systems": "{111}<110>", "texture": texture,
        "grains_min": low, "grains_max": high, "seed": int(seed), "length_unit": "mean grain size",
        "node_features": ",".join(GRAIN_FEATURES),
    }
    return LabelledGraphs(graphs=graphs, heads=HEADS, name="polycrystal", splits=None, metadata=metadata)


def _column(values: np.ndarray | list[float]) -> torch.Tensor:
    return torch.tensor(np.asarray(values, dtype=np.float64).reshape(-1, 1), dtype=torch.float32)
