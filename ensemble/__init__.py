"""Top-K and greedy selection, the ensemble predictor with uncertainty, ASE calculator, calibration,
and export of top-K configurations.

Typical use::

    from ensemble import build_ensemble, BuildOptions, calibrate, EnsemblePredictor
    build_ensemble("campaign", "ens", BuildOptions(top_k=5, method="greedy"))
    # or per-head weights (bagged Caruana per head, at most 5 members):
    # BuildOptions(top_k=5, method="greedy-per-head", candidates=20, bags=20)
    calibrate("ens")                          # per-head std scales fitted on the valset
    pred = EnsemblePredictor("ens").predict_atoms(structures)
    pred.heads["formation_energy"].mean, pred.heads["formation_energy"].std
"""

from ensemble.build import METHODS, BuildOptions, EnsembleBuildError, build_ensemble, choose_members, write_ensemble
from ensemble.calculator import EnsembleCalculator, EnsembleCalculatorError
from ensemble.calibration import (
    CalibrationReport,
    HeadCalibration,
    calibrate,
    calibration_metrics,
    coverage_curve,
    fit_std_scale,
    spearman,
)
from ensemble.campaign import CampaignInfo, CampaignReadError, CampaignTrial, read_campaign
from ensemble.export import FORMATS, ExportError, export_top_k
from ensemble.inputs import BadInput, InputItem, load_inputs
from ensemble.manifest import (
    EnsembleIntegrityError,
    Manifest,
    MemberEntry,
    read_manifest,
    sha256_of,
    write_manifest,
)
from ensemble.outputs import write_node_extxyz, write_predictions_csv
from ensemble.predictor import (
    EnsemblePrediction,
    EnsemblePredictor,
    HeadPrediction,
    MemberModel,
    PredictionError,
    combine,
    read_split,
    run_members,
    split_targets,
)
from ensemble.selection import (
    Selection,
    SelectionError,
    ensemble_loss,
    greedy_per_head,
    greedy_selection,
    select_topk,
)

__all__ = [
    "FORMATS",
    "METHODS",
    "BadInput",
    "BuildOptions",
    "CalibrationReport",
    "CampaignInfo",
    "CampaignReadError",
    "CampaignTrial",
    "EnsembleBuildError",
    "EnsembleCalculator",
    "EnsembleCalculatorError",
    "EnsembleIntegrityError",
    "EnsemblePrediction",
    "EnsemblePredictor",
    "ExportError",
    "HeadCalibration",
    "HeadPrediction",
    "InputItem",
    "Manifest",
    "MemberEntry",
    "MemberModel",
    "PredictionError",
    "Selection",
    "SelectionError",
    "build_ensemble",
    "calibrate",
    "calibration_metrics",
    "choose_members",
    "combine",
    "coverage_curve",
    "ensemble_loss",
    "export_top_k",
    "fit_std_scale",
    "greedy_per_head",
    "greedy_selection",
    "load_inputs",
    "read_campaign",
    "read_manifest",
    "read_split",
    "run_members",
    "select_topk",
    "sha256_of",
    "spearman",
    "split_targets",
    "write_ensemble",
    "write_manifest",
    "write_node_extxyz",
    "write_predictions_csv",
]
