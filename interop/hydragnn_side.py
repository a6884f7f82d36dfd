"""Runs inside HydraGNN's venv (interop/setup_hydragnn.sh), never imports this package: HydraGNN's
own ``AdiosDataset`` on a dataset file we wrote, its ``update_config`` on configs we wrote, its
``create_model_config`` (parameter count) and, for the configs asked, its ``train_validate_test``.

    VENV_HYDRAGNN/bin/hydragnn-python interop/hydragnn_side.py DATASET.bp OUT.json CONFIG.json [CONFIG.json ...]
        [--train N]     train the first N configs for their num_epoch (default 1)
        [--data-path var_config|stored] [--epochs N]   (N overrides the configs' num_epoch)

``--data-path var_config`` (default) is HydraGNN's default path, as its example scripts open a
dataset: ``AdiosDataset(..., var_config=config["NeuralNetwork"]["Variables_of_interest"])``, each
config with its own; ``stored`` reads ``y``/``y_loc`` as stored (``var_config=None``). Potential-mode
configs (``Training.compute_grad_energy``) train with HydraGNN's energy-and-forces loss.

HydraGNN's ``AdiosDataset`` passes an MPI communicator to ``adios2.Stream``; PyPI's adios2 wheel is
serial and refuses it. Run with the MPI-enabled build ``setup_hydragnn.sh`` makes (``bin/hydragnn-
python``); where the venv has only the serial wheel and this is one rank, ``adios2.Stream`` is
wrapped to drop the communicator (one rank reads the same bytes either way), and the report says so.

Writes OUT.json: the samples HydraGNN decoded (count per split, the fields of sample 0 with shapes
and dtypes) and per config: the rewritten config, HydraGNN's parameter count, and for a trained one
the per-epoch train/validation losses HydraGNN's trainer printed (parsed from its return values).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]


def _describe(sample) -> dict:
    out = {}
    for key in sample.keys():
        value = sample[key]
        if hasattr(value, "shape"):
            out[key] = {"shape": list(value.shape), "dtype": str(value.dtype).removeprefix("torch.")}
        else:
            out[key] = {"type": type(value).__name__}
    return out


def _serial_adios2_on_one_rank(comm) -> bool:
    """Wrap a serial adios2's ``Stream`` to drop the communicator HydraGNN passes (one rank only).
    Returns whether it did."""
    import adios2

    if comm.Get_size() != 1 or getattr(adios2, "is_built_with_mpi", True):
        return False
    serial_stream = adios2.Stream

    def stream(path, mode="r", comm=None, *args, **kwargs):
        return serial_stream(path, mode, *args, **kwargs)

    adios2.Stream = stream
    return True


def _datasets(path: str, comm, var_config: dict | None):
    from hydragnn.utils.datasets.adiosdataset import AdiosDataset

    return [AdiosDataset(path, split, comm, preload=False, shmem=False, ddstore=False, var_config=var_config)
            for split in ("trainset", "valset", "testset")]


def one_config(dataset: str, config_path: str, comm, train: bool, workdir: str, data_path: str,
               epochs: int | None) -> dict:
    import torch
    import hydragnn
    from hydragnn.utils.input_config_parsing import update_config

    config = json.loads(Path(config_path).read_text())
    if epochs is not None:
        config["NeuralNetwork"]["Training"]["num_epoch"] = epochs
    original = copy.deepcopy(config)
    var_config = config["NeuralNetwork"]["Variables_of_interest"] if data_path == "var_config" else None
    trainset, valset, testset = _datasets(dataset, comm, copy.deepcopy(var_config))
    batch = config["NeuralNetwork"]["Training"]["batch_size"]
    train_loader, val_loader, test_loader = hydragnn.preprocess.create_dataloaders(trainset, valset, testset, batch)
    config = update_config(config, train_loader, val_loader, test_loader)
    torch.manual_seed(0)
    model = hydragnn.models.create_model_config(config=config["NeuralNetwork"], verbosity=0)
    result = {
        "config": config_path,
        "mpnn_type": config["NeuralNetwork"]["Architecture"]["mpnn_type"],
        "hidden_dim_in": original["NeuralNetwork"]["Architecture"]["hidden_dim"],
        "hidden_dim_after_update_config": config["NeuralNetwork"]["Architecture"]["hidden_dim"],
        "num_parameters": sum(p.numel() for p in model.parameters()),
        "rewritten": config,
    }
    if not train:
        return result
    from hydragnn.train.train_validate_test import validate

    potential = bool(config["NeuralNetwork"]["Training"].get("compute_grad_energy", False))
    num_tasks = 3 if potential else len(config["NeuralNetwork"]["Variables_of_interest"]["type"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["NeuralNetwork"]["Training"]["Optimizer"]["learning_rate"])
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=0.5, patience=5)
    model, optimizer = hydragnn.utils.distributed.distributed_model_wrapper(model, optimizer, 0)
    before, _ = validate(val_loader, model, 0, num_tasks=num_tasks, compute_grad_energy=potential)
    log_name = f"interop_{Path(config_path).stem}"
    started = time.perf_counter()
    cwd = os.getcwd()
    os.chdir(workdir)  # HydraGNN writes ./logs/<log_name>
    try:
        hydragnn.utils.print.print_utils.setup_log(log_name)
        hydragnn.train.train_validate_test(
            model, optimizer, train_loader, val_loader, test_loader, None, scheduler,
            config["NeuralNetwork"], log_name, 0, create_plots=False, compute_grad_energy=potential,
        )
    finally:
        os.chdir(cwd)
    after, _ = validate(val_loader, model, 0, num_tasks=num_tasks, compute_grad_energy=potential)
    result.update(trained_epochs=config["NeuralNetwork"]["Training"]["num_epoch"],
                  train_seconds=time.perf_counter() - started,
                  val_loss_before=float(before), val_loss_after=float(after), potential=potential)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("out")
    parser.add_argument("configs", nargs="+")
    parser.add_argument("--train", type=int, default=1)
    parser.add_argument("--data-path", choices=("var_config", "stored"), default="var_config")
    parser.add_argument("--epochs", type=int, default=None)
    args = parser.parse_args(argv)
    # HydraGNN writes its logs under the working directory, which training changes: absolute paths
    args.dataset = str(Path(args.dataset).resolve())
    args.configs = [str(Path(c).resolve()) for c in args.configs]
    import torch
    from mpi4py import MPI

    torch.set_num_threads(1)
    import hydragnn

    hydragnn.utils.distributed.setup_ddp()  # HydraGNN's update_config needs torch.distributed (gloo here)
    comm = MPI.COMM_WORLD
    report: dict = {"dataset": args.dataset, "configs": [], "data_path": args.data_path,
                    "serial_adios2_shim": _serial_adios2_on_one_rank(comm)}
    trainset, valset, testset = _datasets(args.dataset, comm, None)
    report["samples"] = {"trainset": len(trainset), "valset": len(valset), "testset": len(testset)}
    report["sample0"] = _describe(trainset.get(0))
    with tempfile.TemporaryDirectory() as workdir:
        for i, path in enumerate(args.configs):
            try:
                report["configs"].append(one_config(args.dataset, path, comm, i < args.train, workdir,
                                                   args.data_path, args.epochs))
            except Exception as exc:  # noqa: BLE001 - report every config, one failure each
                report["configs"].append({"config": path, "error": f"{type(exc).__name__}: {exc}",
                                          "traceback": traceback.format_exc()[-4000:]})
    Path(args.out).write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
