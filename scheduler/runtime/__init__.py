"""The MPI runtime of an HPO campaign: ``mpirun -n N hydragnn-ensemble hpo campaign.yaml [--resume]``.

Rank 0 runs the scheduler: the campaign session of :mod:`hpo.session` (journal, optimizer,
candidate pool) and the decisions of :mod:`scheduler.loop` (placement, prefetch, retries), with this
package doing only the MPI choreography; every other rank is an agent owning one slot (one GPU/GCD, or one CPU process). This is the model
``srun --ntasks-per-node=8 --gpus-per-task=1`` gives on Frontier and ``mpiexec -n N`` on a
workstation: each agent keeps the GPU the launcher bound to it, or picks its own from a shared list.
``resources.slots_per_node`` groups the agents of a host into nodes for placement (multi-slot trials
of one node, whole nodes for multi-node trials); slots a host cannot fill (the one rank 0 takes) are
reserved. Each trial runs as its own process(es), started by the agents of its slots; a multi-slot
trial's processes rendezvous through torch.distributed with ``--init-method file://...``.
With ``resources.gpu_sharing`` (:mod:`scheduler.sharing`) a slot may hold several single-slot trials
at once: rank 0 sends each its start, and the slot's agent runs and watches their processes side by
side on its device (NVIDIA MPS where its daemon runs, else time-sliced).
"""

from scheduler.runtime.layout import ClusterLayout, build_layout
from scheduler.runtime.run import CampaignSetupError, default_campaign_dir, run_campaign
from scheduler.runtime.scheduler_rank import CampaignSummary
from scheduler.runtime.launch import device_binding, trial_argv
from scheduler.runtime.outcome import merge_parts

__all__ = [
    "CampaignSetupError",
    "CampaignSummary",
    "ClusterLayout",
    "build_layout",
    "default_campaign_dir",
    "device_binding",
    "merge_parts",
    "run_campaign",
    "trial_argv",
]
