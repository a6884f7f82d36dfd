"""Before the first trial: the base config and every value the search space can give, against the
campaign's dataset.

A trial checks its config against the dataset when it starts
(:func:`hydragnn_ensemble.dataset_check.config_problems`); a mistake there (a head name the dataset
does not have, a potential-mode energy without an energy unit, an input column beyond ``x``) would
fail every trial with the same message. Rank 0 runs the same check once per candidate value before
any trial: the base config, then the base config with each search-space key at each of its
categorical choices and at both ends of its range (one key at a time), and refuses the campaign with
the trial's own message, naming the key and value that causes it. Warnings (a radius other than the
dataset's cutoff) are reported once.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Mapping

from hpo.space import CategoricalParam, Param, SearchSpace, apply_params

__all__ = ["PreflightError", "PreflightReport", "check_against_dataset", "probe_values"]


class PreflightError(ValueError):
    """The campaign's configurations cannot train on its dataset; the message lists every problem."""


@dataclass
class PreflightReport:
    """What the check found: errors (each would fail trials) and warnings, one line each."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    configs_checked: int = 0


def probe_values(param: Param) -> list[Any]:
    """The values of ``param`` the check tries: every categorical choice, else both ends."""
    if isinstance(param, CategoricalParam):
        return list(param.choices)
    return [param.low, param.high] if param.low != param.high else [param.low]


def check_against_dataset(base: Mapping[str, Any], space: SearchSpace, dataset: Any) -> PreflightReport:
    """Check ``base`` and each probed search-space value (see the module docstring) against
    ``dataset`` (a ``.bp`` path or a graph source). Problems of the base config are reported once;
    a value's problems only when the base config does not have them."""
    from hydragnn_ensemble.config import ConfigError, config_from_dict
    from hydragnn_ensemble.dataset_check import config_problems, dataset_facts

    facts = dataset_facts(dataset)
    report = PreflightReport()

    def problems(config_dict: Mapping[str, Any], label: str) -> tuple[list[str], list[str]]:
        report.configs_checked += 1
        with warnings.catch_warnings(record=True) as caught:  # the schema's warnings, reported once
            warnings.simplefilter("always")
            try:
                config = config_from_dict(dict(config_dict), label)
            except ConfigError as exc:
                return list(exc.errors), []
        check = config_problems(config, facts)
        return check.errors, [str(w.message) for w in caught] + check.warnings

    base_errors, base_warnings = problems(base, "base_config")
    report.errors += [f"base_config: {e}" for e in base_errors]
    report.warnings += base_warnings
    for key in space.keys:
        for value in probe_values(space[key]):
            errors, found = problems(apply_params(base, {key: value}), f"{key}={value!r}")
            report.errors += [f"search_space {key} = {value!r}: {e}" for e in errors if e not in base_errors]
            report.warnings += [f"search_space {key} = {value!r}: {w}" for w in found if w not in base_warnings]
    return report
