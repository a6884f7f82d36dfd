"""How the store opens ADIOS2 engines: the BP4 file format, profiling off, nothing left behind.

ADIOS2 (2.12, the PyPI build) writes timing files unless told not to:

* its BP4 and BP5 writers put ``profiling.json`` inside the dataset; BP4 honours the engine
  parameter ``Profile=Off``, BP5 ignores it;
* its BP5 reader writes ``/tmp/<file name>_<pid in hex>_profiling.json`` when it closes, with no
  parameter to turn it off (``BP5Reader::FlushProfiler``), so a test suite or a campaign leaves
  dozens behind in the temp directory. The BP4 reader writes nothing.

So datasets are written as BP4 (HydraGNN's ``AdiosDataset`` and every ADIOS2 reader detect the
format by themselves; with a buffer growth factor of 2 it writes as fast as BP5 here), every
engine gets ``Profile=Off``, and :func:`close_reader` removes the file a BP5 reader (a dataset
made elsewhere) leaves in ``/tmp``; its name is known exactly.
"""

from __future__ import annotations

import os
from pathlib import Path

import adios2

ENGINE = "BP4"
PARAMETERS: dict[str, str] = {"Profile": "Off", "StatsLevel": "0", "BufferGrowthFactor": "2.0"}
BP5_MARKER = "mmd.0"  # the metadata-metadata file only BP5 writes


def _io(name: str) -> adios2.IO:
    io = adios2.Adios().declare_io(name)
    io.set_parameters(dict(PARAMETERS))
    return io


def open_writer(path: Path) -> adios2.Stream:
    """A BP4 write stream at ``path`` without profiling output."""
    io = _io(f"write:{path}")
    io.set_engine(ENGINE)
    return adios2.Stream(io, str(path), "w")


def open_reader(path: Path) -> adios2.FileReader:
    """A random-access reader of ``path`` (BP4 or BP5); close it with :func:`close_reader`."""
    return adios2.FileReader(_io(f"read:{path}"), str(Path(path)))


def bp5_profile_path(path: Path) -> Path:
    """Where ADIOS2's BP5 reader of ``path`` in this process writes its profiling file."""
    return Path("/tmp") / f"{Path(path).name}_{os.getpid():x}_profiling.json"


def close_reader(reader: adios2.FileReader, path: Path) -> None:
    """Close ``reader`` and remove the profiling file a BP5 reader leaves behind."""
    reader.close()
    if (Path(path) / BP5_MARKER).is_file():
        bp5_profile_path(path).unlink(missing_ok=True)
