"""Which of the campaign's allowed trial sizes this run's cluster can start (:func:`usable_sizes`).
How each trial is sized is :mod:`scheduler.sizing`."""

from __future__ import annotations


def usable_sizes(allowed: list[int], slots_per_node: int, slots_on_nodes: list[int]) -> list[int]:
    """The allowed trial sizes this cluster can run, ascending. ``slots_on_nodes``: usable slots of
    each node. A size up to one node needs a node with that many usable slots; a larger one needs
    ``size / slots_per_node`` complete nodes."""
    complete = sum(n == slots_per_node for n in slots_on_nodes)
    biggest = max(slots_on_nodes, default=0)
    ok = sorted(s for s in set(allowed) if (s <= slots_per_node and s <= biggest) or (
        s > slots_per_node and s % slots_per_node == 0 and s // slots_per_node <= complete))
    if not ok:
        raise ValueError(
            f"resources.slots_per_trial {sorted(allowed)}: no size fits this run (usable slots per "
            f"node: {slots_on_nodes}, slots_per_node {slots_per_node}); start more ranks or allow "
            "smaller trials")
    return ok
