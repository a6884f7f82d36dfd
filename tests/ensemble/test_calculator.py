"""The ASE calculator: potential-mode ensembles in BFGS and MD with forces = -dE/dpos; direct heads."""

from __future__ import annotations

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
    assert calc.parameters["on_out_of_domain"] == "ignore"
    atoms = _alloy()
    atoms.calc = calc
    atoms.get_forces()
    assert calc.results["in_domain"] is True and calc.results["domain_reasons"] == []
    assert calc.results["forces_in_domain"].shape == (32,) and calc.results["forces_in_domain"].all()
    inside_std = calc.results["forces_std"].copy()
    vacancy = _alloy()
    del vacancy[7]
    vacancy.calc = calc
    vacancy.get_forces()
    assert calc.results["in_domain"] is False
    assert "neighbour shells outside the training envelope" in calc.results["domain_reasons"][0]
    flagged = ~calc.results["forces_in_domain"]
    assert 10 <= flagged.sum() <= 20  # the vacancy's neighbours
    assert calc.results["forces_std"][flagged].mean() > 1.3 * inside_std.mean()  # the domain term
    calc.set(on_out_of_domain="warn")
    vacancy.rattle(0.01, seed=3)  # a new structure: recomputed
    with pytest.warns(OutOfDomainWarning, match="outside the ensemble's applicability domain"):
        vacancy.get_potential_energy()
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
    assert inside.get_potential_energy() == pytest.approx(inside.get_potential_energy())  # back in: fine
    with pytest.raises(Exception, match="on_out_of_domain must be one of"):
        calc.set(on_out_of_domain="stop")
