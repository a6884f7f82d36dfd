"""Input embedding: atomic numbers (``nn.Embedding``) plus a linear map of the node features ``x``."""

from __future__ import annotations

from torch import Tensor, nn

MAX_ATOMIC_NUMBER = 118


def check_node_features(x: Tensor | None, width: int, dims: tuple[int, ...] = (2,)) -> Tensor:
    """``x`` when it has ``width`` columns in its last dimension and one of ``dims`` dimensions."""
    if x is None or x.dim() not in dims or x.shape[-1] != width:
        shape = None if x is None else tuple(x.shape)
        raise ValueError(f"node features x must be [N, {width}], got {shape}")
    return x


def check_atomic_numbers(z: Tensor) -> Tensor:
    """``z`` when every atomic number lies in the embedding table (0..MAX_ATOMIC_NUMBER)."""
    if z.numel() and (int(z.min()) < 0 or int(z.max()) > MAX_ATOMIC_NUMBER):
        raise ValueError(f"atomic numbers z must lie in 0..{MAX_ATOMIC_NUMBER}")
    return z


class NodeEmbedding(nn.Module):
    """``h0 = Embedding(z) + Linear(x)``.

    The atomic-number table is used when ``use_atomic_numbers`` is set and the batch carries ``z``;
    otherwise only ``Linear(x)``. ``node_feature_dim == 0`` means ``x`` is not read (``z`` then is required).
    """

    def __init__(self, node_feature_dim: int, hidden_dim: int, use_atomic_numbers: bool) -> None:
        super().__init__()
        if node_feature_dim < 0:
            raise ValueError(f"node_feature_dim must be >= 0, got {node_feature_dim}")
        if node_feature_dim == 0 and not use_atomic_numbers:
            raise ValueError("node_feature_dim is 0 and use_atomic_numbers is False: the model has no input")
        self.node_feature_dim = node_feature_dim
        self.atom_table = nn.Embedding(MAX_ATOMIC_NUMBER + 1, hidden_dim) if use_atomic_numbers else None
        self.feature_map = nn.Linear(node_feature_dim, hidden_dim) if node_feature_dim > 0 else None

    def forward(self, x: Tensor | None, z: Tensor | None) -> Tensor:
        h = None
        if self.feature_map is not None:
            h = self.feature_map(check_node_features(x, self.node_feature_dim))
        if self.atom_table is not None and z is not None:
            emb = self.atom_table(check_atomic_numbers(z))
            h = emb if h is None else h + emb
        if h is None:
            raise ValueError("the batch has no z and the model reads no x: nothing to embed")
        return h
