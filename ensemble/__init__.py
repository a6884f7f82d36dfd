"""Top-K, greedy and diverse selection, the ensemble predictor with calibrated, distance-aware
uncertainty and an applicability domain, ASE calculator, export of top-K configurations.

Typical use::

    from ensemble import build_ensemble, BuildOptions, calibrate, EnsemblePredictor
    build_ensemble("campaign", "ens", BuildOptions(top_k=5, method="diverse"))
    calibrate("ens")                          # uncertainty model fitted on the train/val splits
    pred = EnsemblePredictor("ens").predict_atoms(structures)
    pred.heads["formation_energy"].mean, pred.heads["formation_energy"].std
    pred.in_domain, pred.reasons             # applicability domain per structure
"""

from ensemble.build import METHODS, BuildOptions, EnsembleBuildError, build_ensemble, choose_members, write_ensemble
from ensemble.calculator import EnsembleCalculator, EnsembleCalculatorError, OutOfDomainError, OutOfDomainWarning
from ensemble.calibration import CalibrationReport, calibrate
from ensemble.campaign import CampaignInfo, CampaignReadError, CampaignTrial, read_campaign
from ensemble.combine import EnsemblePrediction, HeadPrediction, Observation, combine
from ensemble.domain import DomainCheck, InputDomain
from ensemble.export import FORMATS, ExportError, export_top_k
from ensemble.inputs import BadInput, InputItem, load_inputs
from ensemble.latent import LatentDistances, LatentReference
from ensemble.manifest import (
    EnsembleIntegrityError,
    Manifest,
    MemberEntry,
    read_manifest,
    sha256_of,
    write_manifest,
)
from ensemble.members import MemberModel, MemberOutputs, PredictionError, read_split, run_members, split_targets
from ensemble.metrics import (
    HeadCalibration,
    auroc,
    calibration_metrics,
    coverage_curve,
    fit_std_scale,
    miscalibration_area,
    spearman,
)
from ensemble.outputs import write_node_extxyz, write_predictions_csv
from ensemble.predictor import EnsemblePredictor
from ensemble.selection import (
    Selection,
    SelectionError,
    diverse_selection,
    ensemble_loss,
    greedy_per_head,
    greedy_selection,
    select_topk,
)
from ensemble.uncertainty import (
    AleatoricTerm,
    DistanceTerm,
    EpistemicTerm,
    HeadUncertainty,
    OutOfDomainTerm,
    UncertaintyTerm,
    fit_head,
)

__all__ = [
    "FORMATS", "METHODS", "AleatoricTerm", "BadInput", "BuildOptions", "CalibrationReport", "CampaignInfo",
    "CampaignReadError", "CampaignTrial", "DistanceTerm", "DomainCheck", "EnsembleBuildError",
    "EnsembleCalculator", "EnsembleCalculatorError", "EnsembleIntegrityError", "EnsemblePrediction",
    "EnsemblePredictor", "EpistemicTerm", "ExportError", "HeadCalibration", "HeadPrediction", "HeadUncertainty",
    "InputDomain", "InputItem", "LatentDistances", "LatentReference", "Manifest", "MemberEntry", "MemberModel",
    "MemberOutputs", "Observation", "OutOfDomainError", "OutOfDomainTerm", "OutOfDomainWarning",
    "PredictionError", "Selection", "SelectionError", "UncertaintyTerm", "auroc", "build_ensemble", "calibrate",
    "calibration_metrics", "choose_members", "combine", "coverage_curve", "diverse_selection", "ensemble_loss",
    "export_top_k", "fit_head", "fit_std_scale", "greedy_per_head", "greedy_selection", "load_inputs",
    "miscalibration_area", "read_campaign", "read_manifest", "read_split", "run_members", "select_topk",
    "sha256_of", "spearman", "split_targets", "write_ensemble", "write_manifest", "write_node_extxyz",
    "write_predictions_csv",
]
