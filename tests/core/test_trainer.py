"""The single-trial trainer on real ADIOS2 dataset files: results, failures, DDP, checkpoints."""

from __future__ import annotations

from fractions import Fraction

import copy
import json
import math
from pathlib import Path

import pytest
import torch
from torch_geometric.data import Batch, Data
from torch_geometric.loader import DataLoader

from graph_builders.schema import HeadRegistry, HeadSpec
from graph_builders.store import GraphStore, write_dataset
from hydragnn_ensemble.cli import main as cli_main
from hydragnn_ensemble.config import config_from_dict
from hydragnn_ensemble.result import TrialResult
from hydragnn_ensemble.inference import load_checkpoint
from hydragnn_ensemble.train import CheckpointError, DataError, InMemoryGraphs, train_trial

HEADS = HeadRegistry.of([HeadSpec("energy", "graph", 1, "eV"), HeadSpec("charge", "node", 2, "e")])
torch.set_num_threads(1)  # as in a trial process; set before the module-scoped runs below

SPLITS = {"trainset": list(range(0, 160)), "valset": list(range(160, 200)), "testset": list(range(200, 240))}


def make_graph(g: torch.Generator) -> Data:
    """A small random graph whose targets are smooth functions of its node features."""
    n = int(torch.randint(3, 9, (1,), generator=g))
    x = torch.rand(n, 2, generator=g)
    pos = torch.rand(n, 3, generator=g) * 2.0
    i, j = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    keep = i != j
    edge_index = torch.stack([j[keep], i[keep]])
    d = Data(x=x, pos=pos, edge_index=edge_index,
             edge_attr=(pos[edge_index[0]] - pos[edge_index[1]]).norm(dim=1, keepdim=True))
    d.cell = torch.zeros(1, 3, 3)
    d.pbc = torch.zeros(1, 3, dtype=torch.bool)
    d.edge_shift = torch.zeros(edge_index.shape[1], 3)
    d.y_energy = (3.0 * x[:, :1].mean(0, keepdim=True) - 1.0) * 10.0 + 100.0
    d.y_charge = torch.cat([x[:, 1:] * 2.0, x[:, :1] - x[:, 1:]], dim=1)
    return d


def write_toy_dataset(path: Path, seed: int, n: int = 240) -> Path:
    """``n`` graphs of :func:`make_graph` drawn from ``seed``, written to ``path`` with the test splits."""
    g = torch.Generator().manual_seed(seed)
    write_dataset(path, [make_graph(g) for _ in range(n)], HEADS, splits=SPLITS, metadata={"name": "toy"})
    return path


@pytest.fixture(scope="module")
def graphs() -> list[Data]:
    g = torch.Generator().manual_seed(7)
    return [make_graph(g) for _ in range(240)]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, graphs) -> Path:
    path = tmp_path_factory.mktemp("data") / "toy.bp"
    write_dataset(path, graphs, HEADS, splits=SPLITS, metadata={"name": "toy"})
    return path


def config_dict(**training) -> dict:
    tr = {"num_epoch": 6, "batch_size": 16, "Optimizer": {"learning_rate": 0.005}}
    tr.update(training)
    return {
        "NeuralNetwork": {
            "Architecture": {
                "mpnn_type": "GIN", "hidden_dim": 16, "num_conv_layers": 2,
                "output_heads": {
                    "graph": {"num_sharedlayers": 1, "dim_sharedlayers": 16, "num_headlayers": 1, "dim_headlayers": [16]},
                    "node": {"num_headlayers": 1, "dim_headlayers": [16], "type": "mlp"},
                },
                "task_weights": [1.0, 1.0],
            },
            "Variables_of_interest": {"input_node_features": [0, 1], "output_names": ["energy", "charge"],
                                      "type": ["graph", "node"], "output_dim": [1, 2]},
            "Training": tr,
        }
    }


def run(dataset, run_dir, **training) -> TrialResult:
    return train_trial(config_from_dict(config_dict(**training)), dataset, run_dir, device="cpu", progress=False)


def log_val_losses(run_dir: Path) -> list[float]:
    lines = (run_dir / "train.log").read_text().splitlines()
    return [float(line.split(" val_loss ")[1].split()[0]) for line in lines if " val_loss " in line]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, dataset) -> tuple[Path, TrialResult]:
    run_dir = tmp_path_factory.mktemp("runs") / "tiny"
    return run_dir, run(dataset, run_dir)


def test_tiny_run_result_json(tiny_run, graphs):
    run_dir, result = tiny_run
    on_disk = TrialResult.read(run_dir / "result.json")
    assert on_disk == result
    assert result.status == "completed" and result.ok
    assert result.epochs == 6 and result.failure_reason is None and result.traceback is None
    vals = log_val_losses(run_dir)
    assert len(vals) == 6
    assert result.objective == pytest.approx(min(vals), rel=1e-5)
    assert result.best_epoch == vals.index(min(vals))
    assert result.slots == 1 and result.device == "cpu" and result.checkpoint == "checkpoint.pt"
    assert (run_dir / "checkpoint.pt").is_file()
    assert result.wall_time_s > 0 and result.peak_memory_mb > 50
    loaded = load_checkpoint(run_dir / "checkpoint.pt")
    assert result.num_parameters == sum(p.numel() for p in loaded.model.parameters())
    assert set(result.heads) == {"energy", "charge"}
    assert result.heads["energy"].unit == "eV" and result.heads["charge"].unit == "e"
    # better than predicting the training mean, in physical units
    train = graphs[:160]
    test = graphs[200:]
    e_mean = torch.cat([g.y_energy for g in train]).mean()
    mean_mae = float(torch.cat([g.y_energy for g in test]).sub(e_mean).abs().mean())
    assert result.heads["energy"].test_mae < 0.6 * mean_mae
    for m in result.heads.values():
        assert 0 < m.val_mae <= m.val_rmse and 0 < m.test_mae <= m.test_rmse


def test_checkpoint_reproduces_test_metrics(tiny_run, dataset):
    run_dir, result = tiny_run
    loaded = load_checkpoint(run_dir / "checkpoint.pt")
    assert loaded.epoch == result.best_epoch and loaded.objective == pytest.approx(result.objective)
    with GraphStore(dataset) as store:
        test = [store.get("testset", i) for i in range(store.num_graphs("testset"))]
    abs_err = {"energy": [], "charge": []}
    for batch in DataLoader(test, batch_size=7):
        pred = loaded.predict(batch)
        for name in abs_err:
            abs_err[name].append((pred[name] - batch["y_" + name]).abs().reshape(-1))
    for name, errs in abs_err.items():
        mae = float(torch.cat(errs).double().mean())
        assert mae == pytest.approx(result.heads[name].test_mae, rel=1e-5)


def test_wrong_architecture_checkpoint_is_refused(tiny_run):
    run_dir, _ = tiny_run
    other = config_from_dict(config_dict())
    other.architecture.hidden_dim = 32
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(run_dir / "checkpoint.pt", config=other)
    msg = str(info.value)
    assert msg.startswith(f"{run_dir / 'checkpoint.pt'}: architecture does not match the config: ")
    assert "hidden_dim: checkpoint 16, config 32" in msg
    # weights of another architecture under this checkpoint's spec
    payload = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    payload["model_spec"]["hidden_dim"] = 8
    bad = run_dir / "bad.pt"
    torch.save(payload, bad)
    with pytest.raises(CheckpointError, match=r"bad.pt: weights do not fit the GIN model: shape mismatch"):
        load_checkpoint(bad)
    (run_dir / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="junk.pt: not a readable checkpoint"):
        load_checkpoint(run_dir / "junk.pt")
    # a pickled object is refused in one line naming the file and the class, not torch's screenful
    torch.save({"format": "hydragnn-ensemble-checkpoint", "payload": Fraction(1, 3)}, run_dir / "pickled.pt")
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(run_dir / "pickled.pt")
    assert str(info.value) == (f"{run_dir / 'pickled.pt'}: not a readable checkpoint (it holds a pickled Python "
                               "object (fractions.Fraction), which is never loaded: unpickling it could run "
                               "arbitrary code (read with weights_only=True))")
    # torch's advice to re-run with weights_only=False is not passed on (it would run the file's code)
    torch.save({"format": "hydragnn-ensemble-checkpoint", "payload": _RunsCode()}, run_dir / "code.pt")
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(run_dir / "code.pt")
    assert "pickled Python object (posix.system)" in str(info.value) and "arbitrary code" in str(info.value)
    assert "weights_only=False" not in str(info.value) and "\n" not in str(info.value)


class _RunsCode:
    """Pickles as a call of os.system (never called: the file is refused before)."""

    def __reduce__(self):
        import os

        return (os.system, ("true",))


def test_same_seed_same_result(tmp_path, dataset, tiny_run):
    _, first = tiny_run
    again = run(dataset, tmp_path / "again")
    assert again.objective == first.objective
    assert again.heads == first.heads
    other_seed = run(dataset, tmp_path / "seed1", seed=1)
    assert other_seed.objective != first.objective


def test_divergence_is_reported_and_best_kept(tmp_path, dataset):
    result = run(dataset, tmp_path / "div", num_epoch=4, Optimizer={"learning_rate": 1e12, "type": "SGD"},
                 lr_schedule="none")
    assert result.status == "diverged"
    assert result.failure_reason.startswith("non-finite")
    assert not result.ok
    assert (result.best_epoch is None) == (result.checkpoint is None) == (result.objective is None)
    on_disk = json.loads((tmp_path / "div" / "result.json").read_text())
    assert on_disk["status"] == "diverged"


class TickingClock:
    """A virtual clock that moves ``tick`` seconds each time it is read: the budget runs out after
    a number of epochs that does not depend on how loaded the machine is."""

    def __init__(self, tick: float) -> None:
        self.t, self.tick, self.reads = 0.0, tick, 0

    def __call__(self) -> float:
        self.t += self.tick
        self.reads += 1
        return self.t


def test_time_budget_gives_timeout_with_best_kept(tmp_path, dataset):
    clock = TickingClock(0.02)
    config = config_from_dict(config_dict(num_epoch=100_000, time_budget_s=6.0))
    result = train_trial(config, dataset, tmp_path / "budget", device="cpu", progress=False, clock=clock)
    assert result.status == "timeout"
    # 6 virtual seconds (0.02 s per clock read, about 20 reads per epoch), whatever the machine's load
    assert 2 <= result.epochs < 100
    assert result.failure_reason.startswith("time budget of 6 s reached")
    assert result.wall_time_s == pytest.approx(clock.t - clock.tick)  # on the same clock, from its first read
    assert result.objective is not None and result.checkpoint == "checkpoint.pt"
    assert result.objective == pytest.approx(min(log_val_losses(tmp_path / "budget")), rel=1e-5)
    assert result.heads["energy"].test_mae is not None


def test_exception_becomes_failed_result(tmp_path, dataset):
    result = train_trial(config_from_dict(config_dict()), tmp_path / "missing.bp", tmp_path / "fail",
                         device="cpu", progress=False)
    assert result.status == "failed"
    assert result.failure_reason == f"DataError: {tmp_path / 'missing.bp'}: dataset file does not exist"
    assert "Traceback (most recent call last)" in result.traceback
    assert TrialResult.read(tmp_path / "fail" / "result.json").status == "failed"
    # the CLI: exit code 1 and result.json, even for a config error
    cfg = config_dict()
    cfg["NeuralNetwork"]["Architecture"]["hiden_dim"] = 3
    (tmp_path / "bad.json").write_text(json.dumps(cfg))
    code = cli_main(["train", str(tmp_path / "bad.json"), "--dataset", str(dataset), "-o",
                     str(tmp_path / "cli"), "--device", "cpu", "--no-progress"])
    assert code == 1
    res = TrialResult.read(tmp_path / "cli" / "result.json")
    assert res.status == "failed"
    assert res.failure_reason == (f"ConfigError: {tmp_path / 'bad.json'}: NeuralNetwork.Architecture.hiden_dim: "
                                  "unknown key; did you mean 'hidden_dim'?")


def test_config_not_matching_dataset(tmp_path, dataset):
    cfg = config_dict()
    cfg["NeuralNetwork"]["Variables_of_interest"]["output_dim"] = [1, 3]
    result = train_trial(config_from_dict(cfg), dataset, tmp_path / "dim", device="cpu", progress=False)
    assert result.status == "failed"
    assert ("output_names[1]: head 'charge' has dim 2 in the dataset but output_dim[1] is 3; dataset heads: "
            "energy (graph, dim 1), charge (node, dim 2)") in result.failure_reason
    cfg["NeuralNetwork"]["Variables_of_interest"]["output_names"][1] = "forces"
    result = train_trial(config_from_dict(cfg), dataset, tmp_path / "head", device="cpu", progress=False)
    assert "head 'forces' is not in the dataset" in result.failure_reason


def test_input_columns_out_of_range_is_a_config_error(tmp_path, dataset):
    """A column of x that does not exist is named before any data is prepared (not an IndexError)."""
    cfg = config_dict()
    cfg["NeuralNetwork"]["Variables_of_interest"]["input_node_features"] = [0, 4]
    result = train_trial(config_from_dict(cfg), dataset, tmp_path / "cols", device="cpu", progress=False)
    assert result.status == "failed"
    assert result.failure_reason == (f"ConfigError: {dataset}: NeuralNetwork.Variables_of_interest."
                                     "input_node_features: columns [4] do not exist; the dataset's x has "
                                     "2 column(s) (0..1)")


def test_radius_different_from_the_dataset_cutoff_is_warned(tmp_path, graphs):
    from hydragnn_ensemble.dataset_check import radius_mismatch

    assert radius_mismatch(5.0, 5.0) is None and radius_mismatch(None, 5.0) is None
    assert radius_mismatch(5.0, None) is None
    assert "pairs between the two are not in the graphs" in radius_mismatch(6.0, 5.0)
    path = write_dataset(tmp_path / "cut.bp", graphs[:60], HEADS, metadata={"cutoff": 4.0}, seed=1)
    cfg = config_dict(num_epoch=1)
    cfg["NeuralNetwork"]["Architecture"].update(mpnn_type="SchNet", radius=3.0)
    result = train_trial(config_from_dict(cfg), path, tmp_path / "r", device="cpu", progress=False)
    assert result.status == "completed", result.failure_reason
    log = (tmp_path / "r" / "train.log").read_text()
    assert ("warning: NeuralNetwork.Architecture.radius 3.0 differs from the dataset's graph cutoff 4.0: "
            "edges beyond the radius carry no message") in log


def test_nan_targets_listed_or_skipped(tmp_path, graphs):
    bad = [copy.copy(g) for g in graphs]
    for i in (3, 50):
        bad[i].y_energy = torch.tensor([[float("nan")]])
    bad[170].y_charge = bad[170].y_charge.clone()
    bad[170].y_charge[0, 1] = float("inf")
    source = InMemoryGraphs(HEADS, {k: [bad[i] for i in v] for k, v in SPLITS.items()})
    with pytest.raises(DataError) as info:
        train_trial(config_from_dict(config_dict()), source, tmp_path / "nan", device="cpu", progress=False,
                    raise_errors=True)
    assert str(info.value) == (
        "InMemoryGraphs: 3 sample(s) have NaN/inf targets: trainset[3]: y_energy has NaN/inf; "
        "trainset[50]: y_energy has NaN/inf; valset[10]: y_charge has NaN/inf "
        "(set NeuralNetwork.Training.skip_nan_targets to leave them out)")
    result = train_trial(config_from_dict(config_dict(num_epoch=2, skip_nan_targets=True)), source,
                         tmp_path / "skip", device="cpu", progress=False)
    assert result.status == "completed" and math.isfinite(result.objective)
    log = (tmp_path / "skip" / "train.log").read_text()
    assert "skipped 2 trainset sample(s) with NaN/inf targets: [3, 50]" in log
    assert "skipped 1 valset sample(s) with NaN/inf targets: [10]" in log
    assert "158/39/40 train/val/test graphs" in log


def test_empty_split_is_refused(tmp_path, graphs):
    source = InMemoryGraphs(HEADS, {"trainset": graphs[:10], "valset": [], "testset": graphs[10:12]})
    with pytest.raises(DataError, match="InMemoryGraphs: split 'valset' is empty"):
        train_trial(config_from_dict(config_dict()), source, tmp_path / "empty", device="cpu",
                    progress=False, raise_errors=True)


def _cli_worker(rank: int, argv: list[str]) -> None:
    code = cli_main(argv + ["--rank", str(rank)])
    if code != 0:
        raise SystemExit(code)


def _run_two_ranks(argv: list[str]) -> None:
    """Forked workers (no re-import of torch) each run the real CLI with their --rank; both exit 0."""
    ctx = torch.multiprocessing.start_processes(_cli_worker, args=(argv,), nprocs=2, join=False,
                                                start_method="fork")
    while not ctx.join(timeout=180):
        pass
    assert [p.exitcode for p in ctx.processes] == [0, 0]


@pytest.mark.parametrize("preload", [True, False])
def test_two_processes_equal_one(tmp_path, dataset, preload):
    """2 gloo processes through the real CLI, same global batches (each process's share of equal
    work): same losses and weights, with the splits preloaded or streamed batch by batch."""
    cfg = config_dict(num_epoch=3, lr_schedule="none", preload=preload)
    cfg_path = tmp_path / "cfg.json"
    cfg_path.write_text(json.dumps(cfg))
    single = train_trial(config_from_dict(cfg), dataset, tmp_path / "one", device="cpu", progress=False)
    argv = ["train", str(cfg_path), "--dataset", str(dataset), "-o", str(tmp_path / "two"), "--device", "cpu",
            "--no-progress", "--world-size", "2", "--init-method", f"file://{tmp_path / 'rendezvous'}"]
    _run_two_ranks(argv)
    double = TrialResult.read(tmp_path / "two" / "result.json")
    assert double.slots == 2 and double.status == "completed"
    assert log_val_losses(tmp_path / "two") == pytest.approx(log_val_losses(tmp_path / "one"), rel=1e-4)
    assert double.objective == pytest.approx(single.objective, rel=1e-4)
    for name in ("energy", "charge"):
        assert double.heads[name].test_mae == pytest.approx(single.heads[name].test_mae, rel=1e-3)
    a = torch.load(tmp_path / "one" / "checkpoint.pt", weights_only=True)["state_dict"]
    b = torch.load(tmp_path / "two" / "checkpoint.pt", weights_only=True)["state_dict"]
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-4, atol=1e-5)


def test_a_campaign_stop_ends_a_data_parallel_trial_on_all_ranks_together(tmp_path, dataset):
    """RUN_DIR/stop seen by rank 0 only: both ranks end after the same epoch (an all-reduce of the
    flag), no rank hangs in the next epoch's collectives, and the result says ``stopped``."""
    cfg_path = tmp_path / "cfg.json"
    cfg_path.write_text(json.dumps(config_dict(num_epoch=50, lr_schedule="none")))
    run_dir = tmp_path / "two"
    run_dir.mkdir()
    (run_dir / "stop").write_text("asha: rung 0 (epoch 1), not in the top 1/3")
    argv = ["train", str(cfg_path), "--dataset", str(dataset), "-o", str(run_dir), "--device", "cpu",
            "--no-progress", "--world-size", "2", "--init-method", f"file://{tmp_path / 'rendezvous'}"]
    _run_two_ranks(argv)
    result = TrialResult.read(run_dir / "result.json")
    assert result.status == "stopped" and result.epochs == 1 and result.slots == 2
    assert result.failure_reason.startswith("asha: rung 0 (epoch 1)")
    assert (run_dir / result.checkpoint).is_file()


def pair_potential_graph(g: torch.Generator) -> Data:
    """A small molecule-like cluster with a harmonic pair energy; forces = -dE/dpos exactly."""
    n = int(torch.randint(3, 7, (1,), generator=g))
    pos = (torch.rand(n, 3, generator=g) * 2.5).requires_grad_(True)
    i, j = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    keep = i != j
    edge_index = torch.stack([j[keep], i[keep]])
    r = (pos[edge_index[0]] - pos[edge_index[1]]).norm(dim=1)
    energy = 0.5 * ((r - 1.5) ** 2).sum() * 0.5  # each pair twice
    (grad,) = torch.autograd.grad(energy, pos)
    pos = pos.detach()
    z = torch.full((n,), 29, dtype=torch.long)
    d = Data(x=z.float().unsqueeze(1), z=z, pos=pos, edge_index=edge_index)
    d.cell = torch.zeros(1, 3, 3)
    d.pbc = torch.zeros(1, 3, dtype=torch.bool)
    d.edge_shift = torch.zeros(edge_index.shape[1], 3)
    d.y_energy = (energy.detach() / n).reshape(1, 1)
    d.y_forces = -grad
    return d


def test_potential_mode_forces_are_energy_gradients(tmp_path):
    g = torch.Generator().manual_seed(3)
    molecules = [pair_potential_graph(g) for _ in range(60)]
    heads = HeadRegistry.of([HeadSpec("energy", "graph", 1, "eV/atom"), HeadSpec("forces", "node", 3, "eV/A")])
    source = InMemoryGraphs(heads, {"trainset": molecules[:40], "valset": molecules[40:50],
                                    "testset": molecules[50:]})
    cfg = config_dict(num_epoch=3, compute_grad_energy=True)
    cfg["NeuralNetwork"]["Architecture"]["mpnn_type"] = "SchNet"
    cfg["NeuralNetwork"]["Variables_of_interest"].update(
        input_node_features=[0], output_names=["energy", "forces"], output_dim=[1, 3])
    result = train_trial(config_from_dict(cfg), source, tmp_path / "pot", device="cpu", progress=False)
    assert result.status == "completed", result.failure_reason
    assert result.heads["forces"].unit == "eV/A" and result.heads["forces"].test_mae > 0
    loaded = load_checkpoint(tmp_path / "pot" / "checkpoint.pt")
    assert loaded.spec.energy_head == "energy" and loaded.spec.forces_head == "forces"
    batch = next(iter(DataLoader(molecules[50:], batch_size=10)))
    pred = loaded.predict(batch)
    # the reported forces are minus the gradient of the reported total energy (central differences)
    one = molecules[50]
    n = one.num_nodes
    forces = loaded.predict(Batch.from_data_list([one]))["forces"]
    h = 1e-2
    for atom, axis in ((0, 0), (1, 2), (n - 1, 1)):
        energies = []
        for sign in (1.0, -1.0):
            moved = copy.copy(one)
            moved.pos = one.pos.clone()
            moved.pos[atom, axis] += sign * h
            energies.append(float(loaded.predict(Batch.from_data_list([moved]))["energy"]) * n)
        numeric = -(energies[0] - energies[1]) / (2 * h)
        assert float(forces[atom, axis]) == pytest.approx(numeric, rel=2e-2, abs=2e-3)
    errs = (pred["forces"] - batch.y_forces).abs().mean()
    assert float(errs) == pytest.approx(result.heads["forces"].test_mae, rel=1e-4)


def test_a_campaign_stop_ends_the_trial_after_its_epoch_with_the_best_kept(tmp_path, dataset):
    """RUN_DIR/stop (what a campaign's agent writes): the trainer finishes the epoch, keeps its best
    checkpoint and ends as ``stopped``; every finished epoch is a line of progress.jsonl."""
    run_dir = tmp_path / "stop"
    run_dir.mkdir()
    (run_dir / "stop").write_text("asha: rung 0 (epoch 1), not in the top 1/3")
    result = run(dataset, run_dir, num_epoch=50)
    assert result.status == "stopped" and result.epochs == 1
    assert result.failure_reason == "asha: rung 0 (epoch 1), not in the top 1/3 (after epoch 0)"
    assert result.objective is not None and (run_dir / result.checkpoint).is_file()
    lines = [json.loads(line) for line in (run_dir / "progress.jsonl").read_text().splitlines()]
    assert [line["epoch"] for line in lines] == [1]
    assert lines[0]["objective"] == pytest.approx(result.objective, rel=1e-6)
    assert set(lines[0]["heads"]) == {"energy", "charge"}
    assert lines[0]["heads"]["energy"]["val_mae"] == pytest.approx(result.heads["energy"].val_mae, rel=1e-6)
    assert lines[0]["heads"]["charge"]["val_rmse"] == pytest.approx(result.heads["charge"].val_rmse, rel=1e-6)
    # a stop request that arrives when the budget is done changes nothing: the trial completed
    last = tmp_path / "last"
    last.mkdir()
    (last / "stop").write_text("asha: rung 1 (epoch 9), not in the top 1/3")
    finished = run(dataset, last, num_epoch=1)
    assert finished.status == "completed" and finished.epochs == 1 and finished.failure_reason is None
    # without a stop request every epoch is reported
    full = run(dataset, tmp_path / "full", num_epoch=3)
    curve = [json.loads(line) for line in (tmp_path / "full" / "progress.jsonl").read_text().splitlines()]
    assert full.status == "completed" and [c["epoch"] for c in curve] == [1, 2, 3]
    assert min(c["objective"] for c in curve) == pytest.approx(full.objective, rel=1e-6)


def test_at_a_rung_the_trainer_waits_for_the_verdict(tmp_path, dataset):
    """With ``RUN_DIR/verdicts.json`` (the stopper decides after epochs 1 and 2, wait at most 30 s),
    the trainer waits after those epochs: told to go on after epoch 1, it goes on at once; the
    stop for epoch 2, written 0.3 s after its progress line (the campaign's round trip), lands
    there (no partial epoch 3) instead of part-way through the next epoch."""
    import threading
    import time

    from hydragnn_ensemble.run_dir import RunDir, VerdictWait

    paths = RunDir(tmp_path / "rung")
    paths.root.mkdir()
    paths.verdicts.write_text(VerdictWait(frozenset({1, 2}), 30.0).to_json())

    def campaign() -> None:  # what the agent writes, as rank 0 decides on each progress line
        told = 0
        deadline = time.monotonic() + 120
        while told < 2 and time.monotonic() < deadline:
            lines = paths.progress.read_text().splitlines() if paths.progress.exists() else []
            if len(lines) > told:
                told += 1
                if told == 1:
                    paths.go_on.write_text("1\n")
                else:
                    time.sleep(0.3)
                    paths.stop.write_text("asha: rung 1 (epoch 2), not in the top 1/3")
            time.sleep(0.005)

    helper = threading.Thread(target=campaign)
    helper.start()
    start = time.monotonic()
    result = run(dataset, paths.root, num_epoch=50)
    helper.join()
    assert result.status == "stopped" and result.epochs == 2 and result.partial_epoch == 0.0
    assert result.failure_reason == "asha: rung 1 (epoch 2), not in the top 1/3 (after epoch 1)"
    waits = [float(line.split("waited ")[1].split()[0]) for line in paths.log().read_text().splitlines()
             if "for the campaign's verdict" in line]
    assert len(waits) == 2 and waits[1] >= 0.25 and time.monotonic() - start < 30.0, waits


def test_a_stop_requested_during_an_epoch_ends_it_there(tmp_path, dataset, monkeypatch):
    """A campaign's stop written while epoch 1 trains (here: after its 2nd optimizer step, with
    the trainer looking after every batch) ends the trial within that epoch: 1 completed epoch,
    ``partial_epoch`` the share of epoch 1 it trained (2 of 10 batches: it looks right after the step
    that saw the file written), the reason says so, the
    best checkpoint of epoch 0 is kept, and no progress line is written for the partial epoch."""
    import hydragnn_ensemble.train.trainer as trainer_module
    from torch.optim.optimizer import register_optimizer_step_post_hook

    monkeypatch.setattr(trainer_module, "STOP_POLL_S", 0.0)
    run_dir = tmp_path / "mid"
    run_dir.mkdir()
    steps = []

    def write_stop_in_epoch_1(optimizer, args, kwargs):
        steps.append(1)
        if len(steps) == 12:  # 10 batches of 16 per epoch: the 2nd step of epoch 1
            (run_dir / "stop").write_text("asha: rung 0 (epoch 1), not in the top 1/3")

    handle = register_optimizer_step_post_hook(write_stop_in_epoch_1)
    try:
        result = run(dataset, run_dir, num_epoch=50)
    finally:
        handle.remove()
    assert result.status == "stopped" and result.epochs == 1 and len(steps) == 12
    assert result.partial_epoch == pytest.approx(0.2)
    assert result.failure_reason == "asha: rung 0 (epoch 1), not in the top 1/3 (during epoch 1, 20% trained)"
    assert result.objective is not None and (run_dir / result.checkpoint).is_file()
    lines = (run_dir / "progress.jsonl").read_text().splitlines()
    assert [json.loads(line)["epoch"] for line in lines] == [1]
    again = TrialResult.read(run_dir / "result.json")
    assert again.partial_epoch == pytest.approx(0.2)
