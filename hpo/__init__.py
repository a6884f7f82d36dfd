"""The campaign layer: the campaign file and directory (its one owner), the journal and the state
folded from it, search spaces over HydraGNN config keys, optimizer backends behind one ask/tell
interface, the candidate pool, the results table and the report."""

from hpo.campaign import (
    CampaignChangedError,
    CampaignConfig,
    CampaignConfigError,
    OptimizerConfig,
    ResourcesConfig,
    check_unchanged,
    freeze,
    load_campaign,
    load_frozen_dict,
    validate_campaign,
)
from hpo.campaign_dir import CampaignDir, CampaignDirError, CampaignLock
from hpo.campaign_reader import CampaignReadError, CampaignRecord, read_campaign_dir
from hpo.journal import (
    Journal,
    JournalContents,
    JournalCorruptError,
    JournalEventError,
    TornJournalLineWarning,
    read_events,
    read_journal,
)
from hpo.objective import check_objective_key, objective_value
from hpo.optimizers import (
    OPTIMIZER_NAMES,
    Optimizer,
    OptimizerOptionError,
    Suggestion,
    UnknownSuggestionError,
    make_optimizer,
)
from hpo.pool import CandidatePool
from hpo.report import ReportFigures, format_summary, load_state, summarize, write_report
from hpo.results_table import write_results_csv
from hpo.state import AttemptRecord, CampaignState, TrialRecord
from hpo.space import (
    ConfigPathError,
    SearchSpace,
    SearchSpaceError,
    apply_params,
    check_config_paths,
)

__all__ = [
    "AttemptRecord",
    "CampaignDir",
    "CampaignDirError",
    "CampaignLock",
    "CampaignReadError",
    "CampaignRecord",
    "read_campaign_dir",
    "CampaignChangedError",
    "CampaignConfig",
    "CampaignConfigError",
    "CampaignState",
    "ReportFigures",
    "CandidatePool",
    "ConfigPathError",
    "Journal",
    "JournalContents",
    "JournalCorruptError",
    "JournalEventError",
    "OPTIMIZER_NAMES",
    "Optimizer",
    "OptimizerConfig",
    "OptimizerOptionError",
    "ResourcesConfig",
    "SearchSpace",
    "SearchSpaceError",
    "Suggestion",
    "TornJournalLineWarning",
    "TrialRecord",
    "UnknownSuggestionError",
    "apply_params",
    "check_config_paths",
    "check_objective_key",
    "check_unchanged",
    "format_summary",
    "freeze",
    "load_campaign",
    "load_frozen_dict",
    "load_state",
    "make_optimizer",
    "objective_value",
    "read_events",
    "read_journal",
    "summarize",
    "validate_campaign",
    "write_report",
    "write_results_csv",
]
