"""Members that share an architecture run as one model (stacked parameters, one pass for all).

:func:`plan_stacks` groups the members whose models :func:`~hydragnn_ensemble.model.stacked.stack_key`
accepts and finds equal (same spec, dtype and device) and who read the same graph view (radius,
device); each group of two or more becomes a :class:`MemberStack`, built once when the ensemble is
loaded. :func:`~ensemble.members.run_members` runs a stack in one forward (and, for potentials, one
backward) pass and the other members one after another, with the same results per member to
float32 rounding (a member's forces are still ``-dE/dpos`` of its own energy).

A stack pays off where a member's time is mostly the fixed cost of each operation: small batches
(molecular dynamics of tens of atoms), and GPUs (kernel launches). On a CPU a batch of a few hundred
atoms is compute-bound and a stack's strided ``[rows, K, features]`` work is slower than the members
one after another (``python -m bench.md_speed``), so there a stack runs as one model only for
batches of at most :data:`CPU_STACK_MAX_NODES` atoms.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from hydragnn_ensemble.model.stacked import StackedModels, stack_key


#: on a CPU, the largest batch (atoms) a stack runs as one model: one thread, 3 and 5 SchNet members
#: of 30k parameters, a stack's calls against the members one after another: 1.4-1.6x as fast at 32
#: atoms, 1.1-1.2x at 72, 0.98-1.07x at 108, 0.69-0.86x at 256
CPU_STACK_MAX_NODES = 100


@dataclass
class MemberStack:
    """Members (at ``indices`` of the ensemble's member list) run as one :class:`StackedModels` on
    batches of at most ``max_nodes`` atoms (None: any batch)."""

    indices: list[int]
    loaded: list[Any]  # hydragnn_ensemble.inference.LoadedModel, one per member
    model: StackedModels
    shared_x: bool  # every member reads the same standardised x (computed once)
    max_nodes: int | None = None

    def runs(self, num_nodes: int) -> bool:
        """Whether a batch of ``num_nodes`` atoms runs as one model (else member by member)."""
        return self.max_nodes is None or num_nodes <= self.max_nodes

    def predict_with_embedding(self, batch: Any) -> list[tuple[dict[str, Tensor], Tensor]]:
        """Each member's ``LoadedModel.predict_with_embedding`` of ``batch``, from one pass."""
        x = getattr(batch, "x", None)
        if x is not None and self.model.feature_map is not None:
            x = (self.loaded[0].input_x(x) if self.shared_x
                 else torch.stack([loaded.input_x(x) for loaded in self.loaded], dim=1))
        outs, features = self.model.forward_with_embedding(batch, x)
        return [(loaded.physical(out), features[:, k]) for k, (loaded, out) in enumerate(zip(self.loaded, outs))]


def plan_stacks(members: Sequence[Any]) -> list[MemberStack]:
    """The stacks of ``members`` (``ensemble.members.MemberModel``s; groups of at least two, in member
    order; see the module docstring)."""
    groups: dict[tuple, list[int]] = {}
    for k, member in enumerate(members):
        key = stack_key(member.loaded.model)
        if key is not None:
            groups.setdefault((key, member.radius, member.device), []).append(k)
    stacks = []
    for indices in groups.values():
        if len(indices) < 2:
            continue
        loaded = [members[k].loaded for k in indices]
        for model in loaded:
            model.model.eval()
        shared = all(loaded[0].same_inputs(other) for other in loaded[1:])
        on_cpu = members[indices[0]].device.type == "cpu"
        stacks.append(MemberStack(indices, loaded, StackedModels([m.model for m in loaded]), shared,
                                  CPU_STACK_MAX_NODES if on_cpu else None))
    return stacks
