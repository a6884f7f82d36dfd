"""The single-trial trainer: ``train_trial`` writes result.json, the best-epoch checkpoint,
train.log and, after every epoch, the training state a cut trial resumes from
(:mod:`hydragnn_ensemble.train.resume`; a trained model is loaded back by
:mod:`hydragnn_ensemble.inference`)."""

from hydragnn_ensemble.run_dir import CHECKPOINT_NAME, RESULT_NAME
from hydragnn_ensemble.train.checkpoint import CheckpointError
from hydragnn_ensemble.train.batches import EpochBatches
from hydragnn_ensemble.train.data import DataError, InMemoryGraphs
from hydragnn_ensemble.train.distributed import DistributedContext
from hydragnn_ensemble.train.normalisation import Normaliser
from hydragnn_ensemble.train.trainer import Trainer, train_trial

__all__ = [
    "CHECKPOINT_NAME",
    "RESULT_NAME",
    "CheckpointError",
    "DataError",
    "DistributedContext",
    "EpochBatches",
    "InMemoryGraphs",
    "Normaliser",
    "Trainer",
    "train_trial",
]
