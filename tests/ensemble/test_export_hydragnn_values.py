"""The HydraGNN config the export writes, value for value, against the one HydraGNN expects.

Each expected config is written out by hand from HydraGNN's reading of it (``update_config``,
``create_model_config``): the layer sizes it requires spelled out, the heads laid out as in the
dataset copy (graph features first, then the node features after the input columns), and in
potential mode one energy head with forces by autograd.
"""

from __future__ import annotations

import copy
from pathlib import Path

from ensemble.export import DatasetLayout, for_hydragnn, hydragnn_mismatch
from graph_builders.schema import HeadRegistry, HeadSpec

REGISTRY = HeadRegistry.of([HeadSpec("energy", "graph", 1, "eV"), HeadSpec("forces", "node", 3, "eV/A")])
LAYOUT = DatasetLayout(Path("data.bp"), REGISTRY, input_width=1, edge_is_length=True)
HEADS = {"graph": {"num_sharedlayers": 1, "dim_sharedlayers": 32, "num_headlayers": 2, "dim_headlayers": [32, 16]},
         "node": {"num_headlayers": 1, "dim_headlayers": [16]}}
TRAINING = {"num_epoch": 3, "batch_size": 8, "Optimizer": {"type": "AdamW", "learning_rate": 1e-3}}


def trained(mpnn_type: str = "SchNet") -> dict:
    """A trial's config: forces before energy, no task weights, no radial or filter sizes."""
    return {"NeuralNetwork": {
        "Architecture": {"mpnn_type": mpnn_type, "radius": 5.0, "hidden_dim": 32, "num_conv_layers": 2,
                         "output_heads": copy.deepcopy(HEADS)},
        "Variables_of_interest": {"input_node_features": [0], "output_names": ["forces", "energy"],
                                  "type": ["node", "graph"], "output_dim": [3, 1]},
        "Training": copy.deepcopy(TRAINING)}}


def test_a_schnet_member_is_written_as_hydragnn_expects_it():
    assert hydragnn_mismatch(trained(), LAYOUT) is None
    assert for_hydragnn(trained(), LAYOUT) == {"NeuralNetwork": {
        "Architecture": {
            "mpnn_type": "SchNet", "radius": 5.0, "hidden_dim": 32, "num_conv_layers": 2,
            "output_heads": HEADS,
            "task_weights": [1.0, 1.0],  # ours: 1 per head when unset; HydraGNN reads it unconditionally
            "max_neighbours": 100,  # read unconditionally by HydraGNN's model factory
            "num_gaussians": 50,  # ours: num_radial, else 50; HydraGNN's SchNet requires it
            "num_filters": 32,  # ours: hidden_dim wide
            "edge_features": ["length"],  # the dataset's edge_attr is the length: HydraGNN takes our edges
        },
        "Variables_of_interest": {
            "input_node_features": [0],
            "output_names": ["energy", "forces"], "type": ["graph", "node"], "output_dim": [1, 3],
            "output_index": [0, 1],  # energy: graph feature 0; forces: node feature 1, after the input column
            "graph_feature_names": ["energy"], "graph_feature_dims": [1],
            "node_feature_names": ["node_inputs", "forces"], "node_feature_dims": [1, 3],
        },
        "Training": TRAINING}}


def test_without_the_dataset_only_the_layer_sizes_are_written():
    painn = trained("PaiNN")
    painn["NeuralNetwork"]["Architecture"].update(num_gaussians=12, task_weights=[2.0, 1.0], max_neighbours=20)
    out = for_hydragnn(painn)
    assert out["NeuralNetwork"]["Architecture"] == {
        "mpnn_type": "PaiNN", "radius": 5.0, "hidden_dim": 32, "num_conv_layers": 2, "output_heads": HEADS,
        "num_gaussians": 12, "task_weights": [2.0, 1.0], "max_neighbours": 20,  # what the config sets is kept
        "num_radial": 12,  # HydraGNN's PaiNN builds its radial basis from num_radial
    }
    assert out["NeuralNetwork"]["Variables_of_interest"] == painn["NeuralNetwork"]["Variables_of_interest"]


def test_a_potential_is_one_energy_head_with_forces_by_autograd():
    painn = trained("PaiNN")
    painn["NeuralNetwork"]["Architecture"]["task_weights"] = [10.0, 1.0]  # forces, energy
    painn["NeuralNetwork"]["Training"]["compute_grad_energy"] = True
    assert hydragnn_mismatch(painn, LAYOUT) is None
    out = for_hydragnn(painn, LAYOUT)
    assert out["NeuralNetwork"]["Architecture"] == {
        "mpnn_type": "PaiNN", "radius": 5.0, "hidden_dim": 32, "num_conv_layers": 2, "output_heads": HEADS,
        "task_weights": [1.0],
        "enable_interatomic_potential": True, "graph_pooling": "add",  # the energy: a sum over atoms
        "energy_weight": 1.0, "energy_peratom_weight": 0.0,  # a total energy (eV), not per atom
        "force_weight": 10.0,
        "max_neighbours": 100, "num_radial": 50,
    }
    assert out["NeuralNetwork"]["Variables_of_interest"] == {
        "input_node_features": [0], "output_names": ["energy"], "type": ["graph"], "output_dim": [1],
        "output_index": [0], "graph_feature_names": ["energy"], "graph_feature_dims": [1],
        "node_feature_names": ["node_inputs", "forces"], "node_feature_dims": [1, 3]}
    assert out["NeuralNetwork"]["Training"] == {**TRAINING, "compute_grad_energy": True}


def test_members_hydragnn_would_build_differently_are_named():
    schnet = trained()
    schnet["NeuralNetwork"]["Training"]["compute_grad_energy"] = True
    assert hydragnn_mismatch(schnet, LAYOUT).startswith("potential mode with SchNet: HydraGNN's SchNet refuses")
    cgcnn = trained("CGCNN")
    assert hydragnn_mismatch(cgcnn, LAYOUT).startswith("CGCNN with hidden_dim 32: ")
    assert "len(input_node_features) = 1" in hydragnn_mismatch(cgcnn, LAYOUT)
    cgcnn["NeuralNetwork"]["Architecture"]["hidden_dim"] = 1
    assert hydragnn_mismatch(cgcnn, LAYOUT) is None
    wide = trained()
    wide["NeuralNetwork"]["Architecture"]["num_filters"] = 64
    assert hydragnn_mismatch(wide, LAYOUT) == (
        "SchNet with num_filters 64 != hidden_dim 32: our SchNet's filters are hidden_dim wide (num_filters "
        "is not used here), HydraGNN's num_filters wide")
