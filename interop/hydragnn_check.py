"""Our files in the real HydraGNN: a dataset we build, read by HydraGNN's ``AdiosDataset``; configs we
write, through HydraGNN's ``update_config`` and ``create_model_config`` (parameter counts next to
ours); one epoch of HydraGNN's own training on our dataset.

    bash interop/setup_hydragnn.sh PATH/TO/HydraGNN .venv-hydragnn      # once, ~10 min (torch_scatter)
    .venv/bin/python -m interop.hydragnn_check --hydragnn-python .venv-hydragnn/bin/hydragnn-python \\
        [--num 120] [--hidden 32] [--workdir DIR] [--data-path var_config|stored]

(``bin/hydragnn-python``, not ``bin/python``: it puts the MPI-enabled ADIOS2 the setup built on the
library path; with PyPI's serial adios2 the HydraGNN side wraps it for one rank, see
``interop/hydragnn_side.py``.)

What it does, in this venv: builds the alloy dataset (``--num`` structures, binaries and ternaries,
EMT labels; heads formation_energy, stress, forces) and one config per layer both packages build
(``examples/alloy/config.json`` with that layer, ``--hidden``, 2 conv layers, 1 epoch). Every config
goes through our export rule (:func:`ensemble.export.hydragnn_mismatch`) and is written as the export
writes it, with the dataset copy in the layout it describes (:mod:`ensemble.hydragnn_layout`,
HydraGNN's default path: ``var_config``); then, in HydraGNN's venv,
``interop/hydragnn_side.py`` decodes the samples, rewrites and builds every config and trains the
every one for one epoch. Printed: the fields HydraGNN decoded, per layer our and HydraGNN's
parameter counts, HydraGNN's ``hidden_dim`` after ``update_config``, the validation loss HydraGNN
measured before and after its epoch, and whether our loader takes HydraGNN's rewritten config back.
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("GIN", "SchNet", "PNA", "EGNN", "PAINN", "CGCNN")


def write_inputs(workdir: Path, num: int, hidden: int) -> tuple[Path, list[Path]]:
    """The alloy dataset and one config per layer in ``workdir``."""
    from ensemble.export import DATASET_NAME, DatasetLayout, for_hydragnn
    from ensemble.hydragnn_layout import exported_heads, write_hydragnn_dataset
    from graph_builders.datasets.alloy import make_alloy_dataset
    from graph_builders.store import write_dataset

    source = workdir / "alloy.bp"
    labelled = make_alloy_dataset(num_structures=num, components=(2, 3), seed=0, progress=False)
    write_dataset(source, labelled.graphs, labelled.heads, splits=labelled.splits, metadata=labelled.metadata)
    layout = DatasetLayout.read(source)
    base = json.loads((ROOT / "examples" / "alloy" / "config.json").read_text())
    paths = []
    for layer in LAYERS:
        config = copy.deepcopy(base)
        arch, tr = config["NeuralNetwork"]["Architecture"], config["NeuralNetwork"]["Training"]
        arch.update(mpnn_type=layer, hidden_dim=hidden, num_conv_layers=2)
        for head in arch["output_heads"].values():
            head["dim_headlayers"] = [hidden] * len(head["dim_headlayers"])
        arch["output_heads"]["graph"]["dim_sharedlayers"] = hidden
        tr.update(num_epoch=1, batch_size=16)
        path = workdir / f"{layer}.json"
        path.write_text(json.dumps(for_hydragnn(config, layout), indent=1))  # what export --format hydragnn writes
        paths.append(path)
    data = write_hydragnn_dataset(source, exported_heads(base, layout.heads, layout.input_width),
                                  workdir / DATASET_NAME)
    return data, paths


def our_parameters(config_path: Path, data: Path) -> int:
    """Parameters of the model our trainer builds for ``config_path`` on ``data``."""
    from hydragnn_ensemble.config import load_config
    from hydragnn_ensemble.model import build_model
    from hydragnn_ensemble.train.data import open_source
    from hydragnn_ensemble.train.trainer import prepare_trial

    config = load_config(config_path)
    source = open_source(data)
    try:
        inputs = prepare_trial(config, source, str(data))
    finally:
        source.close()
    return sum(p.numel() for p in build_model(inputs.spec).parameters())


def loads_back(rewritten: dict) -> str:
    """'yes', or our loader's refusal of HydraGNN's rewritten config."""
    from hydragnn_ensemble.config import ConfigError, config_from_dict

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            config_from_dict(rewritten, "rewritten by HydraGNN")
        except ConfigError as exc:
            return "; ".join(exc.errors)[:200]
    return "yes"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hydragnn-python", type=Path, required=True,
                        help="python of the venv interop/setup_hydragnn.sh made")
    parser.add_argument("--num", type=int, default=120)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--data-path", choices=("var_config", "stored"), default="var_config",
                        help="HydraGNN's AdiosDataset with the config's var_config (its default) or without")
    args = parser.parse_args(argv)
    from ensemble.export import hydragnn_mismatch

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="hydragnn_check_"))
    workdir.mkdir(parents=True, exist_ok=True)
    data, configs = write_inputs(workdir, args.num, args.hidden)
    out = workdir / "hydragnn_side.json"
    proc = subprocess.run([str(args.hydragnn_python), str(ROOT / "interop" / "hydragnn_side.py"), str(data),
                           str(out), *map(str, configs), "--train", str(len(configs)), "--data-path", args.data_path],
                          capture_output=True, text=True)
    if proc.returncode != 0 or not out.exists():
        print(proc.stdout[-3000:], proc.stderr[-3000:], sep="\n")
        return 1
    report = json.loads(out.read_text())
    print(f"HydraGNN's AdiosDataset read {report['samples']} samples; sample 0 fields:")
    for key, what in sorted(report["sample0"].items()):
        print(f"  {key:16s} {what}")
    print(f"\n{'layer':7s} {'ours':>9s} {'HydraGNN':>9s} {'ratio':>6s}  hidden in->HydraGNN  "
          "export  loads back  HydraGNN 1 epoch (val loss before -> after)")
    for path, entry in zip(configs, report["configs"]):
        layer = path.stem
        ours = our_parameters(path, data)
        if "error" in entry:
            print(f"{layer:7s} {ours:9d}  HydraGNN failed: {entry['error'][:300]}")
            continue
        theirs = entry["num_parameters"]
        export = "refused" if hydragnn_mismatch(json.loads(path.read_text())) else "written"
        trained = (f"{entry['val_loss_before']:.4g} -> {entry['val_loss_after']:.4g} "
                   f"({entry['train_seconds']:.1f} s)" if "val_loss_after" in entry else "-")
        print(f"{layer:7s} {ours:9d} {theirs:9d} {ours / theirs:6.2f}  {entry['hidden_dim_in']:>6} -> "
              f"{entry['hidden_dim_after_update_config']:<8}  {export:7s} {loads_back(entry['rewritten']):10s}  {trained}")
    print(f"\nfiles in {workdir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
