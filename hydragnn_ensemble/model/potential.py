"""Interatomic-potential mode: energy, forces by autograd, stress by a cell strain.

Convention (the trainer follows it):

* The energy head predicts the energy **per atom** ``e_g`` of graph ``g`` in **physical units**:
  ``e_g = raw_g * energy_scale + energy_shift``, where ``raw_g`` is the graph head's output and
  ``energy_shift``/``energy_scale`` are buffers of :class:`EnergyScale` (defaults 0 and 1) that the
  trainer sets from the training set (``model.set_energy_normalisation(mean, std)``).
* ``E_g = e_g * n_g`` (``n_g`` atoms) is the total energy. The energy head reports ``e_g`` when
  its unit is per atom (``eV/atom``) and ``E_g`` when it is a total (``eV``), so it is compared with
  the labels as they are; the trainer fits ``energy_shift``/``energy_scale`` on the labels per atom
  either way. Forces are ``F = -dE/dpos`` [N, 3] and the
  stress is ``sigma = (1 / V_g) dE_g / d(eps)`` for a symmetric strain ``eps`` applied to positions
  and cell (``r -> r (I + eps)``), in Voigt order ``xx, yy, zz, yz, xz, xy``: ASE's sign convention
  (``Atoms.get_stress()``), so EMT/DFT labels are used as they are; it is converted from eV/Å^3 to
  the stress head's unit (``GPa`` for the alloy data, see :data:`STRESS_UNIT_FACTORS`). Graphs with
  zero cell volume (molecules) get zero stress.
* Energy, forces and stress outputs are therefore all physical and mutually exact
  (forces = -gradient of the energy the model reports). The trainer must NOT normalise these three
  targets; it may divide residuals by their scales inside the loss instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from graph_builders.schema import edge_vectors


class EnergyScale(nn.Module):
    """Maps the raw per-atom energy to physical units: ``raw * scale + shift`` (buffers, saved)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("shift", torch.zeros(()))
        self.register_buffer("scale", torch.ones(()))

    def set(self, shift: float, scale: float) -> None:
        """Set the per-atom energy shift (mean) and scale (std, > 0)."""
        if not scale > 0:
            raise ValueError(f"energy scale must be > 0, got {scale}")
        self.shift.fill_(float(shift))
        self.scale.fill_(float(scale))

    def forward(self, raw: Tensor) -> Tensor:
        return raw * self.scale.to(raw.dtype) + self.shift.to(raw.dtype)


@dataclass
class _GraphView:
    """The attributes :func:`edge_vectors` reads, with strained positions and cell."""

    edge_index: Tensor
    pos: Tensor
    edge_shift: Tensor | None
    cell: Tensor | None
    batch: Tensor


@dataclass
class StrainedInputs:
    """Leaf tensors that forces/stress differentiate against, and the resulting edge vectors."""

    pos: Tensor  # [N, 3] leaf, requires grad
    strain: Tensor | None  # [B, 3, 3] leaf (zeros), requires grad; None without stress
    vectors: Tensor  # [E, 3], differentiable in pos (and strain)


def strained_edge_vectors(data: object, batch: Tensor, num_graphs: int, with_stress: bool) -> StrainedInputs:
    """Edge vectors from a fresh leaf copy of ``pos`` and, for stress, a zero symmetric strain per graph."""
    pos = data.pos.detach().clone().requires_grad_(True)
    edge_shift = getattr(data, "edge_shift", None)
    cell = getattr(data, "cell", None)
    strain = None
    pos_used, cell_used = pos, cell
    if with_stress:
        if cell is None or edge_shift is None:
            raise ValueError("stress needs periodic graphs with cell and edge_shift")
        strain = torch.zeros(num_graphs, 3, 3, dtype=pos.dtype, device=pos.device, requires_grad=True)
        sym = 0.5 * (strain + strain.transpose(1, 2))
        pos_used = pos + torch.einsum("ni,nij->nj", pos, sym.index_select(0, batch))
        cell_used = cell + torch.bmm(cell, sym)
    view = _GraphView(data.edge_index, pos_used, edge_shift, cell_used, batch)
    return StrainedInputs(pos=pos, strain=strain, vectors=edge_vectors(view))


VOIGT_INDICES = ((0, 0), (1, 1), (2, 2), (1, 2), (0, 2), (0, 1))

# Stress from the strain derivative comes out in eV/Å^3 (energy in eV, lengths in Å); the stress
# head's unit in the registry says what the labels use. 1 eV/Å^3 = 160.21766208 GPa.
STRESS_UNIT_FACTORS: dict[str, float] = {
    "": 1.0,  # no unit given: the model's own eV/Å^3
    "eV/Å^3": 1.0,
    "eV/Å³": 1.0,
    "eV/A^3": 1.0,
    "GPa": 160.21766208,
    "kbar": 1602.1766208,
}


def stress_unit_factor(unit: str) -> float:
    """Factor from eV/Å^3 to the stress head's ``unit``; ValueError for a unit we cannot convert to."""
    try:
        return STRESS_UNIT_FACTORS[unit]
    except KeyError:
        raise ValueError(
            f"stress head unit {unit!r} is not supported in potential mode; use one of "
            f"{sorted(STRESS_UNIT_FACTORS)}"
        ) from None


def forces_and_stress(
    total_energy: Tensor, inputs: StrainedInputs, cell: Tensor | None, create_graph: bool
) -> tuple[Tensor, Tensor | None]:
    """``F = -dE/dpos`` [N, 3] and Voigt stress ``(1/V) dE/d(eps)`` [B, 6] (None without strain)."""
    wrt = [inputs.pos] + ([inputs.strain] if inputs.strain is not None else [])
    grads = torch.autograd.grad(
        total_energy.sum(), wrt, create_graph=create_graph, allow_unused=True, materialize_grads=True
    )
    forces = -grads[0]
    if inputs.strain is None:
        return forces, None
    volume = torch.linalg.det(cell).abs()
    safe = torch.where(volume > 0, volume, torch.ones_like(volume))
    stress_matrix = grads[1] / safe.view(-1, 1, 1)
    stress_matrix = torch.where((volume > 0).view(-1, 1, 1), stress_matrix, torch.zeros_like(stress_matrix))
    rows = torch.tensor([a for a, _ in VOIGT_INDICES], device=cell.device)
    cols = torch.tensor([b for _, b in VOIGT_INDICES], device=cell.device)
    return forces, stress_matrix[:, rows, cols]
