"""Edges: the sparse gathers and sums of message passing against plain index operations (values,
first and second derivatives), edge sorting, training numerics against the index path, and the
restructured PaiNN and EGNN layers against the formulas they computed before (issue #15)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch_geometric.data import Batch

from hydragnn_ensemble.model.edges import Edges, sort_edges_by_target
from tests.core.test_model import make_model, random_alloy, to_double

OPS = ["gather_source", "gather_target", "sum_at_target", "neighbour_sum"]


def random_edges(num_nodes: int = 23, num_edges: int = 180, seed: int = 0) -> torch.Tensor:
    """Unsorted edges with repeated (source, target) pairs, self-loops and an isolated node."""
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, num_nodes - 1, (2, num_edges), generator=gen)
    return torch.cat([edge_index, edge_index[:, :20]], dim=1)  # repeats, as periodic images make


def reference(op: str, x: torch.Tensor, edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """The same operation by index_select / index_add_ (what the layers did before Edges)."""
    j, i = edge_index
    if op == "gather_source":
        return x.index_select(0, j)
    if op == "gather_target":
        return x.index_select(0, i)
    messages = x if op == "sum_at_target" else x.index_select(0, j)
    return x.new_zeros((num_nodes,) + tuple(x.shape[1:])).index_add_(0, i, messages)


def first_and_second_grad(fn, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Value, gradient of a fixed nonlinear loss and gradient of the squared gradient norm."""
    x = x.detach().clone().requires_grad_(True)
    out = fn(x)
    weights = torch.linspace(-1.0, 1.0, out.numel(), dtype=x.dtype).view(out.shape)
    loss = (weights * out * out).sum()
    (grad,) = torch.autograd.grad(loss, x, create_graph=True)
    (second,) = torch.autograd.grad((grad * grad).sum(), x)
    return out.detach(), grad.detach(), second


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape", [(8,), (3, 5)])
def test_sparse_operations_match_index_operations_to_second_order(op: str, shape: tuple[int, ...]) -> None:
    num_nodes, edge_index = 23, random_edges()
    rows = edge_index.shape[1] if op == "sum_at_target" else num_nodes
    x = torch.randn((rows,) + shape, generator=torch.Generator().manual_seed(1))
    fast = first_and_second_grad(lambda v: getattr(Edges(edge_index, num_nodes), op)(v), x)
    exact = first_and_second_grad(lambda v: reference(op, v, edge_index, num_nodes), x.double())
    for got, want in zip(fast, exact):
        assert got.dtype == torch.float32
        scale = float(want.abs().max())  # float32 rounding of sums that cancel
        torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-6 * scale)
    assert float(fast[1].abs().sum()) > 0 and float(fast[2].abs().sum()) > 0


def test_float64_takes_the_index_path_and_passes_gradcheck() -> None:
    num_nodes, edge_index = 9, random_edges(9, 40, seed=3)
    edges = Edges(edge_index, num_nodes)
    x = torch.randn(num_nodes, 4, dtype=torch.float64, requires_grad=True)
    for op in ("gather_target", "neighbour_sum"):
        assert torch.autograd.gradcheck(getattr(edges, op), (x,))
        assert torch.autograd.gradgradcheck(getattr(edges, op), (x,))
    assert edges._to_target is None and edges._adjacency is None  # no sparse operator was built


def test_degree_counts_every_incoming_edge() -> None:
    edge_index = random_edges()
    degree = Edges(edge_index, 23).in_degree(torch.float32)
    assert degree.tolist() == torch.bincount(edge_index[1], minlength=23).float().tolist()
    assert degree[22] == 0  # the isolated node


def test_sorting_moves_every_per_edge_field_with_its_edge() -> None:
    graph = random_alloy(4)
    perm = torch.randperm(graph.edge_index.shape[1], generator=torch.Generator().manual_seed(0))
    shuffled = graph.clone()
    for key in ("edge_index", "edge_attr", "edge_shift"):
        shuffled[key] = graph[key][:, perm] if key == "edge_index" else graph[key][perm]
    target = shuffled.edge_index[1]
    assert not bool((target[1:] >= target[:-1]).all())
    restored = sort_edges_by_target(shuffled.clone())
    target = restored.edge_index[1]
    assert bool((target[1:] >= target[:-1]).all())

    def rows(g):  # each edge as one row of all its fields, in a canonical order
        table = torch.cat([g.edge_index.t().double(), g.edge_attr.double(), g.edge_shift.double()], dim=1)
        return table[torch.from_numpy(np.lexsort(table.t().flip(0).numpy()))]

    torch.testing.assert_close(rows(restored), rows(graph))
    for key in ("pos", "x", "z", "cell"):  # node and graph fields untouched
        assert torch.equal(restored[key], graph[key])
    model = make_model("SchNet")
    torch.testing.assert_close(model(restored)["energy"], model(shuffled)["energy"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mpnn_type", ["GIN", "PNA", "CGCNN", "SchNet", "EGNN", "PaiNN"])
def test_training_loss_curve_matches_the_index_path(mpnn_type: str) -> None:
    """Numerics unchanged: eight Adam steps in float32 (sparse operators) follow the same loss
    curve as in float64, where every gather and sum is index_select / index_add_ (the path the
    layers took before Edges)."""
    fast, exact = loss_curves(mpnn_type, [random_alloy(s) for s in range(4)], lr=3e-3)
    assert fast[-1] < fast[0]  # it trains
    assert fast == pytest.approx(exact, rel=2e-4, abs=1e-6)


def loss_curves(mpnn_type: str, graphs: list, lr: float) -> tuple[list[float], list[float]]:
    """The losses of eight Adam steps on one batch of ``graphs`` (four energies), in float32 and
    in float64, from the same initial model."""
    target = torch.tensor([[0.3], [-0.1], [0.7], [0.2]])
    curves = []
    for dtype in (torch.float32, torch.float64):
        model = make_model(mpnn_type, seed=3).to(dtype).train()
        batch = Batch.from_data_list([g if dtype == torch.float32 else to_double(g) for g in graphs])
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        losses = []
        for _ in range(8):
            loss = torch.nn.functional.mse_loss(model(batch)["energy"], target.to(dtype))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        curves.append(losses)
    return curves[0], curves[1]


@pytest.mark.parametrize("op", OPS)
def test_a_graph_without_edges_sums_to_zero(op: str) -> None:
    edges = Edges(torch.zeros(2, 0, dtype=torch.long), 3)
    x = torch.randn(0 if op == "sum_at_target" else 3, 4, requires_grad=True)
    out = getattr(edges, op)(x)
    assert tuple(out.shape) == ((0, 4) if op.startswith("gather") else (3, 4))
    assert float(out.abs().sum()) == 0.0
    out.sum().backward()
    assert tuple(x.grad.shape) == tuple(x.shape)


@pytest.mark.parametrize("reduce", ["max", "min"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_extremes_and_their_gradient_match_scatter_reduce_with_ties(reduce: str, dtype: torch.dtype) -> None:
    num_nodes, edge_index = 23, random_edges()
    gen = torch.Generator().manual_seed(2)
    messages = torch.randn(edge_index.shape[1], 6, generator=gen, dtype=dtype)
    messages[-20:] = messages[:20]  # the repeated edges carry the same message: tied extremes
    grad = torch.randn(num_nodes, 6, generator=gen, dtype=dtype)
    ours = messages.clone().requires_grad_(True)
    out = Edges(edge_index, num_nodes).extreme_at_target(ours, reduce)
    out.backward(grad)
    theirs = messages.clone().requires_grad_(True)
    index = edge_index[1].unsqueeze(-1).expand_as(theirs)
    want = theirs.new_zeros(num_nodes, 6).scatter_reduce(0, index, theirs, "a" + reduce, include_self=False)
    want.backward(grad)
    assert torch.equal(out.detach(), want.detach()) and float(out[22].abs().sum()) == 0.0
    torch.testing.assert_close(ours.grad, theirs.grad)
    assert float((ours.grad != 0).sum()) >= num_nodes - 1  # one or more edges per node and feature


def _layer_inputs(hidden: int = 16, gaussians: int = 12):
    """One batch's scalar features, Edges, geometry (float64) and a vector state, for layer tests."""
    from graph_builders.schema import edge_vectors
    from hydragnn_ensemble.model.geometry import GeometryEncoder

    batch = to_double(Batch.from_data_list([random_alloy(s) for s in range(2)]))
    gen = torch.Generator().manual_seed(7)
    h = torch.randn(batch.num_nodes, hidden, generator=gen, dtype=torch.float64)
    geom = GeometryEncoder(4.0, gaussians).double()(edge_vectors(batch), batch.edge_attr)
    vec = torch.randn(batch.num_nodes, 3, hidden, generator=gen, dtype=torch.float64)
    return h, Edges(batch.edge_index, batch.num_nodes), geom, vec


def test_painn_message_block_is_the_published_formula() -> None:
    """The per-axis vector message and the cutoff folded into the filter compute what the layer
    computed before (the [E, 3, F] broadcast form, written out here with index operations)."""
    from hydragnn_ensemble.model.layers.base import LayerConfig
    from hydragnn_ensemble.model.layers.painn import PaiNNLayer

    torch.manual_seed(0)
    layer = PaiNNLayer(LayerConfig(hidden_dim=16, num_gaussians=12, radius=4.0)).double()
    h, edges, geom, vec = _layer_inputs()
    j, i = edges.index
    n, dim = h.shape[0], 16
    weight = layer.filter(geom.rbf) * geom.cutoff.unsqueeze(-1)
    a, b, c = torch.split(layer.message_mlp(h)[j] * weight, dim, dim=-1)
    s = h + torch.zeros(n, dim, dtype=h.dtype).index_add_(0, i, a)
    dv = geom.unit.unsqueeze(-1) * c.unsqueeze(1) + vec[j] * b.unsqueeze(1)
    v = vec + torch.zeros(n, 3, dim, dtype=h.dtype).index_add_(0, i, dv)
    u_v, v_v = torch.split(layer.uv(v), dim, dim=-1)
    p, q, r = torch.split(layer.update_mlp(torch.cat([s, ((v_v * v_v).sum(1) + 1e-8).sqrt()], -1)), dim, -1)
    want_s, want_v = s + q * (u_v * v_v).sum(dim=1) + r, v + p.unsqueeze(1) * u_v
    got_s, got_v = layer(h, edges, geom, vec)
    torch.testing.assert_close(got_s, want_s)
    torch.testing.assert_close(got_v, want_v)


def _gaussians(distance: torch.Tensor, cutoff: float, size: int) -> torch.Tensor:
    """The Gaussian basis written out: centres on [0, cutoff], width the spacing (the model's centres
    are float32: results agree to ~1e-7)."""
    centres = torch.linspace(0.0, cutoff, size, dtype=distance.dtype)
    spacing = cutoff / (size - 1)
    return torch.exp(-0.5 * ((distance.unsqueeze(-1) - centres) / spacing) ** 2)


@pytest.mark.parametrize("radial_filter", [True, False])
def test_egnn_edge_inputs_in_one_product_are_the_separate_maps(radial_filter: bool) -> None:
    """The layer computes the formula of its docstring: with the radial filter the messages are
    also multiplied by a linear map of the Gaussian basis of the builder's edge length (written
    out here); without it (HydraGNN's EGNN) the layer has no filter's parameters."""
    from hydragnn_ensemble.model.layers.base import LayerConfig
    from hydragnn_ensemble.model.layers.egnn import EGNNLayer

    torch.manual_seed(0)
    config = LayerConfig(hidden_dim=16, edge_dim=1, num_gaussians=12, radius=4.0, num_layers=2,
                         radial_filter=radial_filter)
    layer = EGNNLayer(config).double()
    assert (layer.filter is not None) == radial_filter
    h, edges, geom, vec = _layer_inputs()
    vec = vec[:, :, 0]
    j, i = edges.index
    rij = geom.vector + vec[j] - vec[i]
    d2 = (rij * rij).sum(-1, keepdim=True) / 16.0
    pre = layer.lin_i(h)[i] + layer.lin_j(h)[j] + layer.lin_d(d2) + layer.lin_e(geom.edge_attr)
    length = geom.vector.norm(dim=-1)
    weight = (layer.filter(_gaussians(length, 4.0, 12)) if radial_filter else 1.0) * geom.cutoff.unsqueeze(-1)
    m = layer.edge_out(layer.edge_act(pre)) * weight
    agg = torch.zeros_like(h).index_add_(0, i, m)
    want_h = layer.node_mlp(torch.cat([h, agg], -1))
    shift = torch.zeros_like(vec).index_add_(0, i, rij * layer.coord_mlp(m))
    want_vec = vec + shift / torch.bincount(i, minlength=h.shape[0]).clamp_min(1).unsqueeze(-1)
    got_h, got_vec = layer(h, edges, geom, vec)
    torch.testing.assert_close(got_h, want_h, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got_vec, want_vec, rtol=1e-5, atol=1e-6)


def test_cgcnn_message_is_the_gated_product_times_the_radial_filter() -> None:
    from hydragnn_ensemble.model.layers.base import LayerConfig
    from hydragnn_ensemble.model.layers.cgcnn import CGCNNLayer

    torch.manual_seed(0)
    layer = CGCNNLayer(LayerConfig(hidden_dim=16, edge_dim=1, num_gaussians=12, radius=4.0)).double()
    h, edges, geom, _ = _layer_inputs()
    j, i = edges.index
    rbf = _gaussians(geom.vector.norm(dim=-1), 4.0, 12)
    z = layer.lin_i(h)[i] + layer.lin_j(h)[j] + layer.lin_e(torch.cat([rbf, geom.edge_attr], -1))
    gate, core = z[:, :16], z[:, 16:]
    m = torch.sigmoid(gate) * torch.nn.functional.softplus(core) * layer.filter(rbf) * geom.cutoff.unsqueeze(-1)
    want = torch.zeros_like(h).index_add_(0, i, m)
    got, _ = layer(h, edges, geom)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mpnn_type", ["GIN", "PNA", "SchNet", "EGNN", "PaiNN"])
def test_bf16_autocast_mixes_both_paths(mpnn_type: str) -> None:
    """Under autocast (the trainer's bf16 on CUDA; here on CPU) float32 tensors take the sparse path
    in float32 and bf16 ones the index path; the model trains and stays close to float32."""
    model = make_model(mpnn_type, seed=1).train()
    batch = Batch.from_data_list([random_alloy(s) for s in range(2)])
    want = model(batch)["energy"].detach()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = model(batch)["energy"]
    got.float().sum().backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(bool(torch.isfinite(g).all()) for g in grads)
    torch.testing.assert_close(got.float(), want, rtol=0.1, atol=0.05)  # bf16 keeps ~3 digits per op


def test_gather_times_filter_matches_the_index_product_to_second_order() -> None:
    num_nodes, edge_index = 23, random_edges()
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(num_nodes, 5, generator=gen)
    weight = torch.randn(edge_index.shape[1], 5, generator=gen)
    edges = Edges(edge_index, num_nodes)
    j = edge_index[0]
    cases = [  # (function of x, function of weight), ours and the reference
        (lambda v: edges.gather_source_times(v, weight), lambda v: v.index_select(0, j) * weight.double(), x),
        (lambda w: edges.gather_source_times(x, w), lambda w: x.double().index_select(0, j) * w, weight),
    ]
    for ours, reference, arg in cases:
        fast = first_and_second_grad(ours, arg)
        exact = first_and_second_grad(reference, arg.double())
        for got, want in zip(fast, exact):
            torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-6 * float(want.abs().max()))


def test_the_radial_table_interpolates_a_distance_filter_and_its_gradient() -> None:
    """A filter of the distance alone (``Linear(rbf(d)) * cutoff(d)``, SchNet's and what it feeds)
    looked up in the :class:`RadialTable` matches its per-edge value within 3e-5 of its scale, and
    so does the gradient it passes to the filter's weights; the encoder tabulates only float32
    distances that need no gradient, on batches with more than twice the grid's edges."""
    from hydragnn_ensemble.model.geometry import GeometryEncoder, RadialTable, cosine_cutoff

    gen = torch.Generator().manual_seed(0)
    encoder = GeometryEncoder(5.0, 50, radial_table=True)
    distance = 0.6 + 4.4 * torch.rand(20_000, generator=gen)
    linear = torch.nn.Linear(50, 16)
    table = RadialTable(distance, 5.0, encoder.basis)
    weights = torch.randn(distance.shape[0], 16, generator=gen)

    def filter_grads(values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        linear.zero_grad()
        (weights * values).sum().backward()
        return values.detach(), linear.weight.grad.clone()

    looked_up, grad = filter_grads(table.lookup(linear(table.rbf) * table.cutoff.unsqueeze(-1)))
    exact, grad_exact = filter_grads(linear(encoder.basis(distance)) * cosine_cutoff(distance, 5.0).unsqueeze(-1))
    assert float((looked_up - exact).abs().max()) < 3e-5 * float(exact.abs().max())
    assert float((grad - grad_exact).abs().max()) < 3e-5 * float(grad_exact.abs().max())
    assert encoder.tabulates(distance)
    assert not encoder.tabulates(distance.double())
    assert not encoder.tabulates(distance.clone().requires_grad_(True))  # forces by autograd: per edge
    assert not encoder.tabulates(distance[:6000])  # 6,000 edges < 2 x 3,137 grid points
    assert not GeometryEncoder(5.0, 50).tabulates(distance)  # no layer of the model reads a table


@pytest.mark.parametrize("mpnn_type", ["SchNet", "PaiNN"])
def test_training_through_the_radial_table_follows_the_exact_loss_curve(monkeypatch, mpnn_type: str) -> None:
    """SchNet and PaiNN on batches with more edges than twice the grid: in float32 their filters go
    through the radial table, in float64 they are computed per edge (exactly); eight Adam steps
    follow the same loss curve within 2e-4, as the sparse operators do."""
    from hydragnn_ensemble.model.geometry import RadialTable

    lookups = []
    lookup = RadialTable.lookup
    monkeypatch.setattr(RadialTable, "lookup", lambda self, t: lookups.append(t.dtype) or lookup(self, t))
    graphs = [random_alloy(s, (2, 2, 2)) for s in range(4)]  # 2,300 edges > 2 x 705 grid points
    fast, exact = loss_curves(mpnn_type, graphs, lr=1e-3)
    assert lookups and set(lookups) == {torch.float32}  # the table in float32 only, every layer
    assert fast[-1] < fast[0]
    assert fast == pytest.approx(exact, rel=2e-4, abs=1e-6)


@pytest.mark.parametrize("mpnn_type", ["SchNet", "PaiNN"])
def test_bf16_autocast_through_the_radial_table(monkeypatch, mpnn_type: str) -> None:
    """Under autocast the table's filter comes out of a bf16 linear map times a float32 cutoff and
    is looked up in float32 (the sparse product runs without autocast); the model trains and stays
    within bf16's tolerance of float32."""
    from hydragnn_ensemble.model.geometry import RadialTable

    lookups = []
    lookup = RadialTable.lookup
    monkeypatch.setattr(RadialTable, "lookup", lambda self, t: lookups.append(t.dtype) or lookup(self, t))
    model = make_model(mpnn_type, seed=1).train()
    batch = Batch.from_data_list([random_alloy(s, (2, 2, 2)) for s in range(4)])
    want = model(batch)["energy"].detach()
    lookups.clear()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = model(batch)["energy"]
    got.float().sum().backward()
    assert lookups and set(lookups) == {torch.float32}  # under autocast, every layer
    assert all(bool(torch.isfinite(p.grad).all()) for p in model.parameters() if p.grad is not None)
    torch.testing.assert_close(got.float(), want, rtol=0.1, atol=0.05)


def test_sinc_basis_is_hydragnn_s_finite_at_zero_and_keyed_apart() -> None:
    """HydraGNN's PaiNN basis sin(n pi d / rc) / d (n = 1..4), its limit n pi / rc at d = 0 with a
    finite gradient there; an encoder of that basis never shares geometry with a Gaussian one."""
    from hydragnn_ensemble.model.geometry import GeometryEncoder, SincBasis

    basis = SincBasis(5.0, 4)
    d = torch.tensor([0.0, 1.0, 2.5], dtype=torch.float64, requires_grad=True)
    out = basis(d)
    n = torch.arange(1, 5, dtype=torch.float64)
    torch.testing.assert_close(out[0], n * math.pi / 5.0)
    torch.testing.assert_close(out[1:], torch.sin(d[1:, None].detach() * n * math.pi / 5.0) / d[1:, None].detach())
    out.sum().backward()
    assert torch.isfinite(d.grad).all()
    assert GeometryEncoder(5.0, 4, basis="sinc").basis_key != GeometryEncoder(5.0, 4).basis_key
    with pytest.raises(ValueError, match="unknown radial basis 'bessel'; valid names: gaussian, sinc"):
        GeometryEncoder(5.0, 4, basis="bessel")
