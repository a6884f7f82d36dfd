"""The ASE calculator: potential-mode ensembles in BFGS and MD with forces = -dE/dpos; direct heads."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from ase import units
from ase.build import bulk
from ase.md.verlet import VelocityVerlet
from ase.optimize import BFGS

from ensemble import EnsembleCalculator, EnsemblePredictor


def _alloy():
    atoms = bulk("Cu", "fcc", a=3.62, cubic=True).repeat((2, 2, 2))
    atoms.symbols[[0, 3, 5, 9]] = "Ni"
    atoms.symbols[[12, 20]] = "Pd"
    atoms.rattle(0.05, seed=1)
    return atoms


def test_potential_mode_energy_forces_stress_and_uncertainty(potential_ensemble):
    calc = EnsembleCalculator(potential_ensemble)
    assert calc.implemented_properties == ["energy", "free_energy", "forces", "stress"]
    atoms = _alloy()
    atoms.calc = calc
    energy = atoms.get_potential_energy()
    members = calc.results["energy_members"]
    assert members.shape == (3,)
    assert energy == pytest.approx(members.mean(), rel=1e-9)  # equal weights: plain mean of members
    assert calc.results["energy_std"] == pytest.approx(members.std(), rel=1e-6)
    # per-atom energy head x number of atoms
    pred = EnsemblePredictor(potential_ensemble).predict_atoms([atoms])
    assert energy == pytest.approx(pred.heads["formation_energy"].mean[0, 0] * len(atoms), rel=1e-9)
    forces = atoms.get_forces()
    assert forces.shape == (32, 3) and calc.results["forces_std"].shape == (32, 3)
    assert atoms.get_stress().shape == (6,) and calc.results["stress_std"].shape == (6,)
    # forces are -dE/dpos of the ensemble energy: central differences on the largest components
    h = 1e-2
    for flat in np.argsort(-np.abs(forces).ravel())[:3]:
        i, c = divmod(int(flat), 3)
        probe = atoms.copy()
        probe.calc = calc
        probe.positions[i, c] += h
        e_plus = probe.get_potential_energy()
        probe.positions[i, c] -= 2 * h
        e_minus = probe.get_potential_energy()
        assert -(e_plus - e_minus) / (2 * h) == pytest.approx(forces[i, c], rel=0.05, abs=2e-5)


def test_bfgs_lowers_the_energy(potential_ensemble):
    atoms = _alloy()
    atoms.calc = EnsembleCalculator(potential_ensemble)
    e0 = atoms.get_potential_energy()
    fmax0 = np.abs(atoms.get_forces()).max()
    opt = BFGS(atoms, logfile=None)
    opt.run(fmax=1e-6, steps=4)
    assert opt.nsteps == 4
    assert atoms.get_potential_energy() < e0  # (the largest force component need not fall in 4 steps)
    assert np.isfinite(atoms.get_forces()).all() and fmax0 > 0


def test_velocity_verlet_conserves_energy(potential_ensemble):
    atoms = _alloy()
    atoms.calc = EnsembleCalculator(potential_ensemble)
    rng = np.random.default_rng(0)
    atoms.set_momenta(rng.normal(scale=np.sqrt(300 * units.kB * atoms.get_masses())[:, None], size=(32, 3)))
    dyn = VelocityVerlet(atoms, timestep=1.0 * units.fs)
    record = []
    dyn.attach(lambda: record.append((atoms.get_potential_energy(), atoms.get_kinetic_energy(),
                                      atoms.calc.results["energy_std"])), interval=1)
    dyn.run(10)
    record = np.array(record)
    assert len(record) == 11
    kinetic_change = np.ptp(record[:, 1])
    total = record[:, 0] + record[:, 1]
    assert kinetic_change > 0  # the atoms moved and exchanged energy
    assert np.ptp(total) < 0.05 * kinetic_change  # consistent forces: the total is conserved
    assert np.all(record[:, 2] > 0)


def test_direct_heads_calculator(direct_ensemble):
    from ase.units import GPa

    calc = EnsembleCalculator(direct_ensemble)
    assert calc.implemented_properties == ["energy", "free_energy", "forces", "stress"]
    assert (calc.energy_head, calc.energy_per_atom, calc.stress_factor) == ("formation_energy", True, GPa)
    atoms = _alloy()
    atoms.calc = calc
    pred = EnsemblePredictor(direct_ensemble).predict_atoms([atoms])
    assert atoms.get_potential_energy() == pytest.approx(32 * pred.heads["formation_energy"].mean[0, 0])
    np.testing.assert_allclose(atoms.get_forces(), pred.heads["forces"].mean)
    np.testing.assert_allclose(atoms.get_stress(), pred.heads["stress"].mean[0] * GPa)
    np.testing.assert_allclose(calc.results["stress_std"], pred.heads["stress"].std[0] * GPa)


def test_per_atom_uncertainty_and_stopping_md_outside_the_domain(calibrated_potential_ensemble):
    """Forces get a per-atom std and domain flag; with on_out_of_domain="raise" an MD run stops at
    the step that leaves the domain (here: a vacancy, which the training cells never had)."""
    from ensemble import OutOfDomainError, OutOfDomainWarning

    calc = EnsembleCalculator(calibrated_potential_ensemble)
    assert calc.parameters["on_out_of_domain"] == "warn"  # the default
    atoms = _alloy()
    atoms.calc = calc
    atoms.get_forces()
    assert calc.results["in_domain"] is True and calc.results["domain_reasons"] == []
    assert calc.results["forces_in_domain"].shape == (32,) and calc.results["forces_in_domain"].all()
    inside_std = calc.results["forces_std"].copy()
    vacancy = _alloy()
    del vacancy[7]
    vacancy.calc = calc
    with pytest.warns(OutOfDomainWarning, match="outside the ensemble's applicability domain at its first calc"):
        vacancy.get_forces()
    assert calc.results["in_domain"] is False
    assert "neighbour shells outside the training envelope" in calc.results["domain_reasons"][0]
    flagged = ~calc.results["forces_in_domain"]
    assert 10 <= flagged.sum() <= 20  # the vacancy's neighbours
    assert calc.results["forces_std"][flagged].mean() > 1.3 * inside_std.mean()  # the domain term
    with warnings.catch_warnings(record=True) as caught:  # still outside: warned once, not per step
        warnings.simplefilter("always")
        for seed in (3, 4):
            vacancy.rattle(0.01, seed=seed)  # a new geometry: recomputed
            vacancy.get_potential_energy()
    assert calc.results["in_domain"] is False and not [w for w in caught if w.category is OutOfDomainWarning]
    calc.set(on_out_of_domain="raise")
    inside = _alloy()
    inside.calc = calc
    VelocityVerlet(inside, timestep=1.0 * units.fs).run(2)  # in the domain: runs
    with pytest.raises(OutOfDomainError, match="neighbour shells"):
        VelocityVerlet(vacancy, timestep=1.0 * units.fs).run(3)  # stops at once
    for _ in range(2):  # asked again for the same structure: raises again, never the cached values
        with pytest.raises(OutOfDomainError, match="neighbour shells"):
            vacancy.get_potential_energy()
    assert calc.results["in_domain"] is False  # the refused step's results are there to read
    # back in: computed for this structure (not the refused one's results), as the predictor gives it
    back_in = inside.get_potential_energy()
    pred = EnsemblePredictor(calibrated_potential_ensemble).predict_atoms([inside])
    expected = pred.heads[calc.energy_head].mean[0, 0] * (len(inside) if calc.energy_per_atom else 1)
    assert back_in == pytest.approx(expected, rel=1e-9) and calc.results["in_domain"] is True
    with pytest.raises(Exception, match="on_out_of_domain must be one of"):
        calc.set(on_out_of_domain="stop")


def _emt_pressure_and_energy(atoms) -> tuple[float, float]:
    """EMT's pressure (GPa, positive in compression) and energy per atom of ``atoms``."""
    from ase.calculators.emt import EMT
    from ase.units import GPa

    probe = atoms.copy()
    probe.calc = EMT()
    return float(-probe.get_stress()[:3].mean() / GPa), float(probe.get_potential_energy()) / len(probe)


def _compressing_relaxation(calc, steps: int):
    """A BFGS relaxation of the in-domain alloy while its cell is compressed by 3% after every step
    (as a barostat gone wrong or a careless driver would): the atoms and the run."""
    atoms = _alloy()
    atoms.calc = calc
    opt = BFGS(atoms, logfile=None)
    opt.attach(lambda: atoms.set_cell(atoms.cell * 0.97, scale_atoms=True), interval=1)
    return atoms, lambda: opt.run(fmax=1e-9, steps=steps)


def test_a_relaxation_that_leaves_the_domain_says_so_once_and_can_stop_there(calibrated_potential_ensemble,
                                                                          alloy_store):
    """Default: one warning, at the calculation where the relaxation leaves the domain; with
    on_out_of_domain="raise" the same relaxation stops at that calculation, where EMT's pressure is
    far beyond any training cell's (at the start it was inside their range)."""
    import re

    from ensemble import OutOfDomainError, OutOfDomainWarning
    from graph_builders.store import GraphStore

    with GraphStore(alloy_store) as store:
        trained = -store.read_key("trainset", "y_stress")[:, :3].mean(axis=1)  # pressures, GPa
    calc = EnsembleCalculator(calibrated_potential_ensemble)
    atoms, run = _compressing_relaxation(calc, steps=8)
    start_pressure, start_energy = _emt_pressure_and_energy(atoms)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run()
    ours = [str(w.message) for w in caught if w.category is OutOfDomainWarning]
    assert len(ours) == 1 and calc.results["in_domain"] is False  # still outside at the end: warned once
    left = int(re.search(r"at calculation (\d+) of this structure", ours[0]).group(1))
    assert left > 1  # it started inside

    calc.set(on_out_of_domain="raise")
    atoms, run = _compressing_relaxation(calc, steps=8)
    with pytest.raises(OutOfDomainError, match=f"at calculation {left} of this structure"):
        run()
    pressure, energy = _emt_pressure_and_energy(atoms)  # the geometry of the refused calculation
    print(f"left the domain at calculation {left}, the cell at {atoms.get_volume() / _alloy().get_volume():.3f} of "
          f"its volume: EMT pressure {pressure:.1f} GPa there ({start_pressure:.1f} at the start; the training "
          f"cells' from {trained.min():.1f} to {trained.max():.1f}), EMT energy {energy - start_energy:+.3f} "
          "eV/atom from the start")
    assert trained.min() < start_pressure < trained.max() and pressure > 1.5 * trained.max()
    assert energy - start_energy > 0.1  # a relaxation that climbs 0.1 eV/atom in EMT's eyes
