"""Per-group (Mondrian) conformal scales on synthetic data of known distribution: the coverage they
promise is checked against fresh draws of the same distribution, not against the fit itself."""

from __future__ import annotations

import numpy as np
import pytest

from ensemble.group_calibration import GroupScales, conformal_scale, fit_group_scales
from ensemble.uncertainty import HeadUncertainty, TermInputs, combine_terms, fit_head


def test_conformal_scale_of_gaussian_z_is_its_sd():
    rng = np.random.default_rng(0)
    assert conformal_scale(rng.normal(size=200_000)) == pytest.approx(1.0, abs=0.01)
    assert conformal_scale(2.5 * rng.normal(size=200_000)) == pytest.approx(2.5, abs=0.03)


def test_split_conformal_covers_a_new_row_at_least_95_percent_of_the_time():
    """The finite-sample promise: over many calibration sets of 40 rows of a heavy-tailed error
    (Student t, 3 dof), a new row of the same distribution lies inside 1.96 x scale at least 95%
    of the time (the scale is at least the conformal quantile)."""
    rng = np.random.default_rng(1)
    draws = 4000
    z_cal = rng.standard_t(3, size=(draws, 40))
    z_new = rng.standard_t(3, size=draws)
    scales = np.array([conformal_scale(z) for z in z_cal])
    covered = np.abs(z_new) <= 1.959963984540054 * scales
    assert covered.mean() >= 0.95 - 2 * np.sqrt(0.95 * 0.05 / draws)


def test_groups_fix_a_std_that_is_wrong_in_one_part_of_the_range():
    """A term model right for small stds and 2.5x too small for large ones: one NLL weight cannot
    hold both; the per-group scales give 95% coverage in each half on fresh rows."""
    rng = np.random.default_rng(2)

    def draw(n):
        spread = rng.uniform(0.5, 2.0, n)
        factor = np.where(spread > 1.25, 2.5, 1.0)
        return spread, (rng.normal(size=n) * spread * factor)[:, None]

    spread, errors = draw(4000)
    inputs = TermInputs(spread[:, None] ** 2, None, None, None, None, None)
    model = fit_head(inputs, errors, None, group_score="std")
    plain = fit_head(inputs, errors, None, group_score=None)
    assert model.groups is not None and len(model.groups.scales) == 4
    spread, errors = draw(40_000)
    fresh = TermInputs(spread[:, None] ** 2, None, None, None, None, None)
    for m, ok in ((model, True), (plain, False)):
        covered = np.abs(errors[:, 0]) <= 1.96 * combine_terms(m, fresh).std[:, 0]
        per_half = [covered[spread <= 1.25].mean(), covered[spread > 1.25].mean()]
        assert all(0.93 <= c <= 0.985 for c in per_half) == ok, per_half


def test_rows_beyond_the_calibration_range_take_the_end_groups_scale():
    groups = fit_group_scales("size", np.repeat([32.0, 48.0], 50), np.concatenate([np.ones(50), 3 * np.ones(50)]))
    assert groups.edges == [40.0]
    np.testing.assert_allclose(groups.scale(np.array([8.0, 32.0, 48.0, 256.0])), [1.0, 1.0, 3.0, 3.0])


def test_a_model_stored_before_the_groups_reads_and_round_trips():
    old = HeadUncertainty.model_validate({"weights": {"epistemic": 2.0}})
    assert old.groups is None
    new = old.model_copy(update={"groups": GroupScales(score="size", edges=[40.0], scales=[1.0, 2.0])})
    back = HeadUncertainty.model_validate(new.model_dump())
    sizes = np.array([32, 108])
    inputs = TermInputs(np.ones((2, 1)), None, None, None, None, None, size=sizes)
    np.testing.assert_allclose(combine_terms(back, inputs).std[:, 0], np.sqrt(2.0) * np.array([1.0, 2.0]))
