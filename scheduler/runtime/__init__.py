"""The MPI runtime of an HPO campaign: ``mpirun -n N hydragnn-ensemble hpo campaign.yaml [--resume]``.

Rank 0 runs the scheduler (optimizer, candidate pool, placement, journal); every other rank is an
agent owning one slot (one GPU/GCD, or one CPU process). This is the model
``srun --ntasks-per-node=8 --gpus-per-task=1`` gives on Frontier and ``mpiexec -n N`` on a
workstation: each agent keeps the GPU the launcher bound to it, or picks its own from a shared list.
``resources.slots_per_node`` groups the agents of a host into nodes for placement (multi-slot trials
of one node, whole nodes for multi-node trials); slots a host cannot fill (the one rank 0 takes) are
reserved. Each trial runs as its own process(es), started by the agents of its slots; a multi-slot
trial's processes rendezvous through torch.distributed with ``--init-method file://...``.
"""

from scheduler.runtime.campaign_dir import CampaignDir, CampaignDirError, CampaignLock
from scheduler.runtime.layout import ClusterLayout, build_layout
from scheduler.runtime.placement_registry import POLICIES, make_policy, register_policy
from scheduler.runtime.run import CampaignSetupError, default_campaign_dir, run_campaign
from scheduler.runtime.scheduler_rank import CampaignSummary
from scheduler.runtime.trial_process import device_binding, merge_parts, trial_argv

__all__ = [
    "POLICIES",
    "CampaignDir",
    "CampaignDirError",
    "CampaignLock",
    "CampaignSetupError",
    "CampaignSummary",
    "ClusterLayout",
    "build_layout",
    "default_campaign_dir",
    "device_binding",
    "make_policy",
    "merge_parts",
    "register_policy",
    "run_campaign",
    "trial_argv",
]
