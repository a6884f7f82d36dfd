"""Runs inside HydraGNN's venv (interop/setup_hydragnn.sh), never imports this package: HydraGNN's
own training epoch (``hydragnn.train.train_validate_test.train``) on a dataset file we wrote, read
by its ``AdiosDataset`` (preloaded), for the model its ``create_model_config`` builds from a config.

    VENV_HYDRAGNN/bin/hydragnn-python interop/hydragnn_throughput.py DATASET.bp CONFIG.json --epochs 5

Prints one JSON line: the parameter count, the training graphs, the seconds of every epoch (wall
and CPU of this process) and the peak RSS. ``bench/hydragnn_anchor.py`` runs it beside ours.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]


def _groups(model) -> dict[str, int]:
    """Parameters per top-level submodule (``module.`` of a DDP wrapper dropped)."""
    out: dict[str, int] = {}
    for name, p in model.named_parameters():
        parts = name.removeprefix("module.").split(".")
        key = ".".join(parts[:2]) if parts[0] in ("graph_convs", "feature_layers", "heads_NN") else parts[0]
        out[key] = out.get(key, 0) + p.numel()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("config")
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args(argv)
    import torch
    from mpi4py import MPI

    torch.set_num_threads(1)
    import hydragnn
    from hydragnn.train.train_validate_test import train
    from hydragnn.utils.datasets.adiosdataset import AdiosDataset
    from hydragnn.utils.input_config_parsing import update_config

    hydragnn.utils.distributed.setup_ddp()  # HydraGNN's update_config needs torch.distributed (gloo here)

    config = json.loads(Path(args.config).read_text())
    var_config = config["NeuralNetwork"]["Variables_of_interest"]
    splits = [AdiosDataset(args.dataset, split, MPI.COMM_WORLD, preload=True, shmem=False, ddstore=False,
                           var_config=None) for split in ("trainset", "valset", "testset")]  # y/y_loc as stored
    batch = config["NeuralNetwork"]["Training"]["batch_size"]
    train_loader, val_loader, test_loader = hydragnn.preprocess.create_dataloaders(*splits, batch)
    config = update_config(config, train_loader, val_loader, test_loader)
    torch.manual_seed(0)
    model = hydragnn.models.create_model_config(config=config["NeuralNetwork"], verbosity=0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["NeuralNetwork"]["Training"]["Optimizer"]["learning_rate"])
    model, optimizer = hydragnn.utils.distributed.distributed_model_wrapper(model, optimizer, 0)
    num_tasks = len(var_config["type"])
    wall, cpu = [], []
    for _ in range(args.epochs):
        t, c = time.perf_counter(), time.process_time()
        train(train_loader, model, optimizer, 0, num_tasks=num_tasks)
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    print(json.dumps({
        "params": sum(p.numel() for p in model.parameters()),
        "param_groups": _groups(model),
        "hidden_dim_after_update_config": config["NeuralNetwork"]["Architecture"]["hidden_dim"],
        "train_graphs": len(splits[0]), "wall_s": wall, "cpu_s": cpu, "threads": torch.get_num_threads(),
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
