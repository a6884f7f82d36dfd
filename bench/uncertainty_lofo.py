"""Leave-one-family-out evaluation of the uncertainty model's design choices (``bench/uncertainty.py``).

Every test set but in distribution is a *family* of shift. A *design* is one choice of the model's
free parts: which rule terms (``domain``, ``strain``: each added for named shifts; the retired
``composition`` term was the third) it keeps and which difficulty score its per-group scales use (:mod:`ensemble.group_calibration`,
or none); the term weights and group scales of every design are fitted on the calibration split
only (``fit_head``). For each held-out family ``F`` the design is chosen on the other families (and
in distribution), never on ``F``, by: fewest families failing (95% coverage < 0.80 or RMSE / mean
std outside 1/3-3), then the highest AUROC over their rows; then ``F`` is reported under that
design. The out-of-domain flag is judged the same way: the rule of :mod:`ensemble.domain` plus the
latent limit (fitted on the calibration split), against a flag on the std (``std > k x`` the
calibration RMSE, ``k`` chosen on the other families by F1 of catching errors > 3x the
in-distribution MAE).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

RULES: tuple[str, ...] = ("domain", "strain")
GROUP_CHOICES: tuple[str | None, ...] = (None, "std", "distance", "size")
STD_FLAG_FACTORS: tuple[float, ...] = (2.0, 3.0, 4.0, 6.0, 8.0)
ID = "in_distribution"
LARGE_ERROR = 3.0  # an error is large beyond this many in-distribution MAEs


@dataclass(frozen=True)
class Design:
    """One choice of the model's free parts (see the module docstring)."""

    rules: frozenset[str]
    groups: str | None

    def label(self) -> str:
        rules = "+".join(r for r in RULES if r in self.rules) or "no rules"
        return f"{rules}, groups {self.groups or 'none'}"


@dataclass
class SetRows:
    """One set's rows of one head: inputs of the terms, errors (prediction - target), flag."""

    inputs: object  # ensemble.uncertainty.TermInputs
    errors: np.ndarray  # [rows, dim]
    flagged: np.ndarray | None  # [rows] out of domain by the rule (None: no domain)


@dataclass
class Scored:
    """A design's std per set, and its metrics per set."""

    std: dict[str, np.ndarray]  # set -> [rows]
    cov95: dict[str, float]
    ratio: dict[str, float]  # RMSE / mean std
    zms: dict[str, float]


@dataclass
class FamilyResult:
    """One held-out family under the design chosen without it."""

    family: str
    design: Design
    n: int
    mae: float
    ratio: float
    cov95: float
    zms: float
    auroc: float | None  # over in distribution and this family's rows
    confident_wrong: float | None  # share of its in-domain rows with |err| > 3 std (None: none in domain)
    in_domain: float | None
    large: float  # share of its rows with a large error
    rule_flag: tuple[float | None, float | None]  # (precision, recall) of the rule's flag on its rows
    std_flag: tuple[float | None, float | None]  # of the std flag, k chosen without it
    std_flag_k: float


@dataclass
class LofoReport:
    """Per held-out family, the pooled figures, and each rule term's worth."""

    families: list[FamilyResult]
    pooled_auroc: float
    id_design: Design
    id_cov95: float
    id_zms: float
    rule_flag_pooled: tuple[float | None, float | None]
    std_flag_pooled: tuple[float | None, float | None]
    without: dict[str, tuple[float, int]]  # design space without a part -> (pooled AUROC, families meeting)


def collect(predictor, sets: dict[str, list], store: Path, head: str) -> tuple[SetRows, dict[str, SetRows], dict]:
    """The calibration split's rows, every test set's rows of ``head``, and what ``fit_head`` reads
    from the training split (targets, strain and composition responses)."""
    from ensemble.calibration import _responses
    from ensemble.combine import head_inputs
    from ensemble.members import read_split, split_targets
    from ensemble.uncertainty import distance_limit, outside_domain

    reference = read_split(store, "trainset")
    train_targets = split_targets(reference, predictor.heads)
    strains = _responses(predictor, reference, train_targets)

    def rows(graphs: list) -> SetRows:
        hi = head_inputs(predictor.heads, predictor.member_ids, predictor.weights, predictor.observe(graphs),
                         predictor.head_weights)[head]
        return SetRows(hi.terms, hi.mean - split_targets(graphs, predictor.heads)[head], None)

    cal = rows(read_split(store, "calset"))
    limit = None if cal.inputs.distance is None else distance_limit(cal.inputs.distance)
    tests = {}
    for name, graphs in sets.items():
        r = rows(graphs)
        r.flagged = outside_domain(r.inputs, limit)
        tests[name] = r
    return cal, tests, {"train_targets": train_targets.get(head), "strain": strains.get(head)}


def fit_design(design: Design, cal: SetRows, training: dict):
    """The head's model under ``design``, fitted on the calibration rows."""
    from ensemble.uncertainty import fit_head

    return fit_head(cal.inputs, cal.errors, training["train_targets"] if "domain" in design.rules else None,
                    training["strain"] if "strain" in design.rules else None, group_score=design.groups)


def score(model, tests: dict[str, SetRows]) -> Scored:
    """The model's std and metrics on every set (graph heads: one component)."""
    from ensemble.uncertainty import combine_terms

    out = Scored({}, {}, {}, {})
    for name, r in tests.items():
        std = combine_terms(model, r.inputs).std
        err = r.errors
        out.std[name] = std.mean(axis=1)
        z = err / std
        out.cov95[name] = float(np.mean(np.abs(z) <= 1.96))
        out.ratio[name] = float(np.sqrt(np.mean(err * err)) / np.mean(std))
        out.zms[name] = float(np.mean(z * z))
    return out


def _abs_err(r: SetRows) -> np.ndarray:
    return np.abs(r.errors).mean(axis=1)


def _fails(s: Scored, family: str) -> bool:
    return s.cov95[family] < 0.80 or not (1 / 3 <= s.ratio[family] <= 3)


def _auroc(std: np.ndarray, large: np.ndarray) -> float | None:
    from ensemble.metrics import auroc

    return auroc(std, large)


def _precision_recall(flag: np.ndarray, large: np.ndarray) -> tuple[float | None, float | None]:
    hits = float(np.sum(flag & large))
    return (hits / flag.sum() if flag.any() else None, hits / large.sum() if large.any() else None)


def choose(scored: dict[Design, Scored], families: list[str], tests: dict[str, SetRows],
           threshold: float) -> Design:
    """The design with the fewest failing ``families`` (in distribution's coverage outside 0.90-0.98
    counts as one), then the highest AUROC over in distribution and their rows."""
    names = [ID, *families]
    large = np.concatenate([_abs_err(tests[n]) > threshold for n in names])

    def key(item: tuple[Design, Scored]) -> tuple[int, float]:
        _, s = item
        fails = sum(_fails(s, f) for f in families) + int(not 0.90 <= s.cov95[ID] <= 0.98)
        area = _auroc(np.concatenate([s.std[n] for n in names]), large)
        return fails, -(area or 0.0)

    return min(scored.items(), key=key)[0]


def _std_flag_k(scored: Scored, families: list[str], tests: dict[str, SetRows], unit: float,
                threshold: float) -> float:
    """The std flag's factor with the best F1 over in distribution and ``families``."""
    names = [ID, *families]
    std = np.concatenate([scored.std[n] for n in names])
    large = np.concatenate([_abs_err(tests[n]) > threshold for n in names])

    def f1(k: float) -> float:
        p, r = _precision_recall(std > k * unit, large)
        return 0.0 if not p or not r else 2 * p * r / (p + r)

    return max(STD_FLAG_FACTORS, key=f1)


def lofo(cal: SetRows, tests: dict[str, SetRows], training: dict,
         designs: list[Design] | None = None, ablate: bool = True) -> LofoReport:
    """The leave-one-family-out report (see the module docstring); ``ablate``: also each part's
    worth (the same evaluation over the designs without it)."""
    designs = designs or [Design(frozenset(c), g) for n in range(len(RULES) + 1)
                          for c in itertools.combinations(RULES, n) for g in GROUP_CHOICES]
    families = [n for n in tests if n != ID]
    threshold = LARGE_ERROR * float(np.mean(_abs_err(tests[ID])))
    unit = float(np.sqrt(np.mean(cal.errors ** 2)))
    scored = {d: score(fit_design(d, cal, training), tests) for d in designs}
    results = []
    for family in families:
        others = [f for f in families if f != family]
        design = choose(scored, others, tests, threshold)
        s, r = scored[design], tests[family]
        err = _abs_err(r)
        large = err > threshold
        id_large = _abs_err(tests[ID]) > threshold
        area = _auroc(np.concatenate([s.std[ID], s.std[family]]), np.concatenate([id_large, large]))
        inside = None if r.flagged is None else ~r.flagged
        wrong = None if inside is None or not inside.any() else float(np.mean(err[inside] > 3 * s.std[family][inside]))
        k = _std_flag_k(s, others, tests, unit, threshold)
        results.append(FamilyResult(
            family, design, len(err), float(err.mean()), s.ratio[family], s.cov95[family], s.zms[family], area,
            wrong, None if inside is None else float(inside.mean()), float(large.mean()),
            _precision_recall(r.flagged, large) if r.flagged is not None else (None, None),
            _precision_recall(s.std[family] > k * unit, large), k))
    id_design = choose(scored, families, tests, threshold)
    pooled_std = np.concatenate([scored[id_design].std[ID]] + [scored[f.design].std[f.family] for f in results])
    pooled_large = np.concatenate([_abs_err(tests[n]) > threshold for n in [ID, *families]])
    flags = [tests[n].flagged for n in [ID, *families]]
    rule_pooled = (_precision_recall(np.concatenate(flags), pooled_large) if all(f is not None for f in flags)
                   else (None, None))
    k_all = _std_flag_k(scored[id_design], families, tests, unit, threshold)
    std_flag = np.concatenate([scored[id_design].std[ID] > k_all * unit]
                              + [scored[f.design].std[f.family] > f.std_flag_k * unit for f in results])
    report = LofoReport(results, _auroc(pooled_std, pooled_large) or float("nan"), id_design,
                        scored[id_design].cov95[ID], scored[id_design].zms[ID], rule_pooled,
                        _precision_recall(std_flag, pooled_large), {})
    for part in (*RULES, "groups") if ablate else ():
        subset = [d for d in designs if (part not in d.rules if part in RULES else d.groups is None)]
        if subset and len(subset) < len(designs):
            sub = lofo(cal, tests, training, subset, ablate=False)
            met = sum(f.cov95 >= 0.80 and 1 / 3 <= f.ratio <= 3 for f in sub.families)
            report.without[part] = (sub.pooled_auroc, met)
    return report


def _fmt(v: float | None, spec: str = ".2f") -> str:
    return "-" if v is None else format(v, spec)


def print_lofo(name: str, report: LofoReport, unit: float = 1e3) -> None:
    """The per-family table, the spread over families and the pooled figures."""
    print(f"\n== {name}: leave-one-family-out (design and std-flag factor chosen on the other families; "
          "weights and group scales on the calset)")
    print(f"{'held-out family':<17}{'n':>4}{'MAE':>8}{'RMSE/std':>9}{'cov95':>7}{'ZMS':>7}{'AUROC':>7}"
          f"{'in dom':>7}{'conf.wrong':>11}{'large':>7}{'rule P/R':>11}{'std P/R':>11}  design")
    for f in report.families:
        print(f"{f.family:<17}{f.n:>4}{unit * f.mae:>8.1f}{f.ratio:>9.2f}{f.cov95:>7.2f}{f.zms:>7.2f}"
              f"{_fmt(f.auroc, '.3f'):>7}{_fmt(f.in_domain):>7}"
              f"{_fmt(None if f.confident_wrong is None else 100 * f.confident_wrong, '.1f'):>10}%"
              f"{f.large:>7.2f}{_fmt(f.rule_flag[0]) + '/' + _fmt(f.rule_flag[1]):>11}"
              f"{_fmt(f.std_flag[0]) + '/' + _fmt(f.std_flag[1]):>11}  {f.design.label()} (k {f.std_flag_k:g})")
    cov = [f.cov95 for f in report.families]
    ratio = [f.ratio for f in report.families]
    areas = [f.auroc for f in report.families if f.auroc is not None]
    wrong = [f.confident_wrong for f in report.families if f.confident_wrong is not None]
    met = sum(c >= 0.80 and 1 / 3 <= r <= 3 for c, r in zip(cov, ratio))
    print(f"spread over {len(cov)} families: cov95 min {min(cov):.2f} median {np.median(cov):.2f}; RMSE/std "
          f"{min(ratio):.2f}-{max(ratio):.2f} (median {np.median(ratio):.2f}); AUROC min {min(areas):.3f} median "
          f"{np.median(areas):.3f}; confidently wrong (in domain) max {100 * max(wrong, default=0):.1f}%; "
          f"families meeting cov95 >= 0.80 and RMSE/std 1/3-3: {met}/{len(cov)}")
    print(f"pooled LOFO AUROC {report.pooled_auroc:.3f}; in distribution (design {report.id_design.label()}): "
          f"cov95 {report.id_cov95:.2f}, ZMS {report.id_zms:.2f}; flag precision/recall pooled: rule "
          f"{_fmt(report.rule_flag_pooled[0])}/{_fmt(report.rule_flag_pooled[1])}, std "
          f"{_fmt(report.std_flag_pooled[0])}/{_fmt(report.std_flag_pooled[1])}")
    for part, (area, n) in report.without.items():
        print(f"  design space without {part}: pooled LOFO AUROC {area:.3f}, families meeting {n}/{len(cov)}")
