"""The single-trial trainer: ``train_trial`` (writes result.json, checkpoint, train.log) and
``load_checkpoint`` (rebuilds a trained model)."""

from hydragnn_ensemble.run_dir import CHECKPOINT_NAME, RESULT_NAME
from hydragnn_ensemble.train.checkpoint import (
    CheckpointError,
    LoadedModel,
    load_checkpoint,
)
from hydragnn_ensemble.train.data import DataError, InMemoryGraphs, ShardedBatchSampler
from hydragnn_ensemble.train.distributed import DistributedContext
from hydragnn_ensemble.train.normalisation import Normaliser
from hydragnn_ensemble.train.trainer import Trainer, train_trial

__all__ = [
    "CHECKPOINT_NAME",
    "RESULT_NAME",
    "CheckpointError",
    "DataError",
    "DistributedContext",
    "InMemoryGraphs",
    "LoadedModel",
    "Normaliser",
    "ShardedBatchSampler",
    "Trainer",
    "load_checkpoint",
    "train_trial",
]
