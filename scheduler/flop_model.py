"""The analytic part of the cost model: a FLOPs-like count per graph and conv layer for each
``mpnn_type``::

    flops = layers x (nodes x hidden^2 x dense + edges x hidden x message + edges x hidden^2 x edge_dense)

(``dense``: node MLPs, ``message``: per-edge messages, ``edge_dense``: per-edge MLPs/filters, see
:data:`MPNN_COSTS`), plus the per-graph heads. The measured rates turn it into seconds
(:class:`scheduler.cost_anchors.TypeRates`).
"""

from __future__ import annotations

__all__ = ["MPNN_COSTS", "graph_flops", "layer_flops"]

# (dense, message, edge_dense): relative cost per conv layer of node MLPs, messages, per-edge MLPs
MPNN_COSTS: dict[str, tuple[float, float, float]] = {
    "GIN": (2.0, 1.0, 0.0),
    "SchNet": (2.0, 1.0, 1.0),
    "EGNN": (2.0, 1.0, 2.0),
    "PNA": (4.0, 4.0, 1.0),
    "PaiNN": (6.0, 6.0, 0.0),
    "GAT": (2.0, 2.0, 0.0),
    "CGCNN": (2.0, 2.0, 1.0),
}


def layer_flops(mpnn_type: str, hidden: int, nodes: float, edges: float) -> float:
    """FLOPs-like cost of one conv layer on one graph."""
    dense, message, edge_dense = MPNN_COSTS[mpnn_type]
    h = float(hidden)
    return nodes * h * h * dense + edges * h * message + edges * h * h * edge_dense


def graph_flops(mpnn_type: str, hidden: int, layers: int, heads: int, nodes: float, edges: float) -> float:
    """FLOPs-like cost of one graph: its conv layers and per-graph MLP heads."""
    return layers * layer_flops(mpnn_type, hidden, nodes, edges) + heads * 2.0 * hidden * hidden
