"""An ASE calculator backed by an ensemble: energy, forces and stress with their uncertainties.

Which heads become ASE properties:

* **energy** (eV): the graph head of dim 1 named by ``energy_head`` (default: ``energy`` if
  present, else ``formation_energy``; in potential mode the members' energy head). Its unit decides
  (:func:`graph_builders.schema.energy_unit`): a total (``eV``, ``meV``, ``Ha``, ...) is the
  structure's energy, converted to eV; a per-atom unit (``eV/atom``) is multiplied by the number of
  atoms (``formation_energy`` in eV/atom gives the total formation energy of the cell: the energy
  relative to the pure elements, which has the same forces as the total energy). A head whose unit
  is not an energy is refused with :class:`EnsembleCalculatorError`.
* **forces** (eV/Å): the node head of dim 3 (``forces``). For potential-mode members these are
  ``-dE/dpos`` of the members' own energies, so forces are consistent with the energy (a finite
  difference of the energy matches them); for ordinary members they come from the separately
  trained forces head and are only as consistent as the training made them.
* **stress** (eV/Å^3, ASE's Voigt order and sign): the graph head of dim 6, converted from the
  head's unit (GPa for the alloy data). Potential-mode members report the strain derivative of the
  energy in that same unit.

``calc.results`` also holds ``energy_std``, ``forces_std`` [N, 3] and ``stress_std`` [6] (total
ensemble std, calibrated when the ensemble is), ``<property>_members`` with each member's value,
and, when the ensemble stores its applicability domain, ``in_domain`` (bool), ``domain_reasons``
(why not), ``latent_distance`` (about 1 in distribution) and ``forces_in_domain`` [N].

Settings live in ``calc.parameters`` (``calc.set(...)`` changes them): ``energy_head`` (see above)
and ``on_out_of_domain``, what happens when a structure is outside the applicability domain:

* ``"warn"`` (default): an :class:`OutOfDomainWarning` when a structure *leaves* the domain, once:
  at its first calculation outside (the message says which calculation of that structure it is:
  an optimiser's or a molecular dynamics run's step is its calculation minus one), not again while
  it stays outside, again if it comes back and leaves once more. A structure is one ``Atoms``
  object with its atoms (a new object, or atoms added or removed, is a new structure);
* ``"raise"``: :class:`OutOfDomainError` from the calculation, which stops an ASE optimiser or a
  molecular dynamics run at the step that leaves the domain (``opt.run()`` raises it: catch it to
  keep the geometry where it left). The results of that step are kept in ``calc.results`` to be
  read, but the calculator does not count them as calculated: asking for a property of the same
  structure again raises again;
* ``"ignore"``: only the results say it (``in_domain``, ``domain_reasons``).
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Sequence

from ase.calculators.calculator import Calculator, all_changes

from graph_builders.schema import HeadRegistry, energy_unit
from hydragnn_ensemble.model.potential import stress_unit_factor
from ensemble.predictor import EnsemblePredictor


class EnsembleCalculatorError(ValueError):
    """The ensemble cannot provide what the calculator needs (no energy head, unknown unit)."""


class OutOfDomainError(RuntimeError):
    """A structure outside the ensemble's applicability domain, with ``on_out_of_domain="raise"``."""


class OutOfDomainWarning(UserWarning):
    """A structure left the ensemble's applicability domain, with ``on_out_of_domain="warn"``."""


ON_OUT_OF_DOMAIN: tuple[str, ...] = ("ignore", "warn", "raise")
DEFAULT_ON_OUT_OF_DOMAIN = "warn"


def _find(heads: HeadRegistry, level: str, dim: int, preferred: Sequence[str]) -> str | None:
    for name in preferred:
        if name in heads and heads[name].level == level and heads[name].dim == dim:
            return name
    return next((h.name for h in heads if h.level == level and h.dim == dim), None)


def _snapshot(atoms) -> tuple:
    """What identifies a structure for the calculator (positions, numbers, cell, pbc), as bytes."""
    return (atoms.positions.tobytes(), atoms.numbers.tobytes(), atoms.cell.array.tobytes(),
            atoms.pbc.tobytes())


class EnsembleCalculator(Calculator):
    """ASE calculator for an ensemble directory (see the module docstring)."""

    implemented_properties: list[str] = []
    default_parameters: dict[str, Any] = {"energy_head": None, "on_out_of_domain": DEFAULT_ON_OUT_OF_DOMAIN}

    def __init__(self, ensemble_dir: str | os.PathLike | None = None, *,
                 predictor: EnsemblePredictor | None = None, devices: Sequence[str] | None = None,
                 **kwargs: Any) -> None:
        if predictor is None:
            if ensemble_dir is None:
                raise EnsembleCalculatorError("pass an ensemble directory or a predictor")
            predictor = EnsemblePredictor(ensemble_dir, devices=devices)
        self.predictor = predictor
        self.potential_mode = any(m.potential_mode for m in predictor.manifest.members)
        self._refused: tuple | None = None  # the structure last refused as out of domain
        self._structure: tuple | None = None  # the structure calculated last (see _follow)
        self._calculations = 0  # calculations of that structure
        self._outside = False  # its last calculation was outside the domain
        super().__init__(**kwargs)
        self._resolve_heads()

    def set(self, **kwargs: Any) -> dict:
        """Change settings (``energy_head``, ``on_out_of_domain``); clears the results, and a new
        ``on_out_of_domain`` starts every structure afresh (the next one outside warns)."""
        changed = super().set(**kwargs)
        if changed and hasattr(self, "predictor"):
            self._resolve_heads()
        if "on_out_of_domain" in changed:
            self._structure, self._outside = None, False
        return changed

    def _follow(self, atoms) -> int:
        """Count this calculation for ``atoms``' structure (see the module docstring); its number."""
        key = (id(atoms), atoms.numbers.tobytes())
        if key != self._structure:
            self._structure, self._calculations, self._outside = key, 0, False
        self._calculations += 1
        return self._calculations

    def _resolve_heads(self) -> None:
        heads = self.predictor.heads
        energy_head = self.parameters.get("energy_head")
        if self.parameters.get("on_out_of_domain") not in ON_OUT_OF_DOMAIN:
            raise EnsembleCalculatorError(f"on_out_of_domain must be one of {ON_OUT_OF_DOMAIN}, "
                                          f"got {self.parameters.get('on_out_of_domain')!r}")
        if energy_head is not None and energy_head not in heads:
            raise EnsembleCalculatorError(f"energy head {energy_head!r} is not one of {heads.names}")
        self.energy_head = energy_head or _find(heads, "graph", 1, ("energy", "formation_energy"))
        self.forces_head = _find(heads, "node", 3, ("forces",))
        self.stress_head = _find(heads, "graph", 6, ("stress",))
        self.energy_per_atom, self.energy_to_ev = False, 1.0
        if self.energy_head is not None:
            unit = energy_unit(heads[self.energy_head].unit)
            if unit is None:
                raise EnsembleCalculatorError(
                    f"energy head {self.energy_head!r} has unit {heads[self.energy_head].unit!r}, not an energy "
                    "unit: the calculator cannot tell a total (eV) from an energy per atom (eV/atom); "
                    "pass energy_head= another head")
            self.energy_per_atom, self.energy_to_ev = unit.per_atom, unit.to_ev
        self.stress_factor = 1.0
        if self.stress_head is not None:
            try:  # the head's unit -> eV/Å^3 (the model reports potential-mode stress in it too)
                self.stress_factor = 1.0 / stress_unit_factor(heads[self.stress_head].unit)
            except ValueError as exc:
                raise EnsembleCalculatorError(f"stress head {self.stress_head!r}: {exc}") from None
        props = []
        if self.energy_head is not None:
            props += ["energy", "free_energy"]
        if self.forces_head is not None:
            props.append("forces")
        if self.stress_head is not None:
            props.append("stress")
        if not props:
            raise EnsembleCalculatorError(f"the ensemble's heads {heads.names} give no energy, forces or stress")
        self.implemented_properties = props

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes) -> None:
        calculation = self._follow(atoms if atoms is not None else self.atoms)
        super().calculate(atoms, properties, system_changes)
        self._refused = None
        n = len(self.atoms)
        pred = self.predictor.predict_graphs([self.predictor.build_graph(self.atoms)])
        results: dict[str, Any] = {}
        if self.energy_head is not None:
            hp = pred.heads[self.energy_head]
            factor = self.energy_to_ev * (float(n) if self.energy_per_atom else 1.0)
            results["energy"] = float(hp.mean[0, 0]) * factor
            results["free_energy"] = results["energy"]
            results["energy_std"] = float(hp.std[0, 0]) * factor
            results["energy_members"] = hp.members[:, 0, 0] * factor
            if hp.distance is not None:
                results["latent_distance"] = float(hp.distance[0])
        if self.forces_head is not None:
            hp = pred.heads[self.forces_head]
            results["forces"] = hp.mean.copy()
            results["forces_std"] = hp.std.copy()
            results["forces_members"] = hp.members.copy()
            if hp.in_domain is not None:
                results["forces_in_domain"] = hp.in_domain.copy()
        if self.stress_head is not None:
            hp = pred.heads[self.stress_head]
            results["stress"] = hp.mean[0] * self.stress_factor
            results["stress_std"] = hp.std[0] * self.stress_factor
            results["stress_members"] = hp.members[:, 0, :] * self.stress_factor
        if pred.in_domain is not None:
            results["in_domain"] = bool(pred.in_domain[0])
            results["domain_reasons"] = list(pred.reasons[0])
        self.results = results
        outside = pred.in_domain is not None and not bool(pred.in_domain[0])
        left, self._outside = outside and not self._outside, outside
        if outside:
            self._out_of_domain(pred.reasons[0], calculation, left)

    def check_state(self, atoms, tol: float = 1e-15) -> list[str]:
        """ASE's check (what changed since the last calculation), except that a structure found
        outside the domain under ``on_out_of_domain="raise"`` counts as never calculated, so asking
        again raises again instead of returning the cached values."""
        if self._refused is not None and self._refused == _snapshot(atoms):
            return list(all_changes)
        return super().check_state(atoms, tol)

    def _out_of_domain(self, reasons: list[str], calculation: int, left: bool) -> None:
        """Raise, or warn when the structure has just ``left`` the domain (``on_out_of_domain``)."""
        action = self.parameters["on_out_of_domain"]
        where = (f"at calculation {calculation} of this structure (step {calculation - 1} of an optimiser or MD run)"
                 if calculation > 1 else "at its first calculation")
        message = (f"{self.atoms.get_chemical_formula()}: outside the ensemble's applicability domain {where}: "
                   + "; ".join(reasons))
        if action == "raise":
            self._refused = _snapshot(self.atoms)
            raise OutOfDomainError(message)
        if action == "warn" and left:
            warnings.warn(message + " (warned once while it stays outside; on_out_of_domain=\"raise\" stops a run "
                          "here)", OutOfDomainWarning, stacklevel=3)
