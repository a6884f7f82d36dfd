"""Our config loader over every JSON config in a HydraGNN checkout (examples/ and tests/inputs/).

    .venv/bin/python -m interop.hydragnn_configs --hydragnn PATH/TO/HydraGNN [--verbose]

Each ``*.json`` under ``examples/`` and ``tests/inputs/`` (pretrained model files left out) is
one of: ``loaded`` (our :func:`hydragnn_ensemble.config.config_from_dict` accepts it; warnings are
counted), ``refused`` (a HydraGNN training config we do not take, with the first line of the
reason), ``not a config`` (valid JSON without a ``NeuralNetwork`` section: dataset descriptions,
DeepSpeed settings) or ``invalid JSON``. Prints one line per file and the counts; exits 0.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]


@dataclass
class Outcome:
    path: str
    kind: str  # loaded | refused | not a config | invalid JSON
    detail: str = ""


def config_files(root: Path) -> list[Path]:
    """The JSON files of a HydraGNN checkout's examples/ and tests/inputs/."""
    found = [*sorted((root / "examples").rglob("*.json")), *sorted((root / "tests" / "inputs").rglob("*.json"))]
    return [p for p in found if "pretrained_models" not in p.parts]


def classify(path: Path, root: Path) -> Outcome:
    """Load one file with our loader and say what happened."""
    from hydragnn_ensemble.config import ConfigError, config_from_dict

    name = str(path.relative_to(root))
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return Outcome(name, "invalid JSON", str(exc).splitlines()[0])
    if not isinstance(data, dict) or "NeuralNetwork" not in data:
        return Outcome(name, "not a config", "no NeuralNetwork section")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            config_from_dict(data, name)
        except ConfigError as exc:
            return Outcome(name, "refused", "; ".join(exc.errors)[:300])
    detail = "; ".join(str(w.message).splitlines()[0][:120] for w in caught)
    return Outcome(name, "loaded", detail)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hydragnn", type=Path, required=True, help="a HydraGNN checkout (work tree)")
    parser.add_argument("--verbose", action="store_true", help="print the warnings of loaded configs")
    args = parser.parse_args(argv)
    root = args.hydragnn.resolve()
    outcomes = [classify(p, root) for p in config_files(root)]
    for o in outcomes:
        if o.kind != "loaded" or args.verbose:
            print(f"{o.kind:13s} {o.path}" + (f"\n              {o.detail}" if o.detail else ""))
    configs = [o for o in outcomes if o.kind in ("loaded", "refused")]
    loaded = [o for o in configs if o.kind == "loaded"]
    warned = [o for o in loaded if o.detail]
    print(f"\n{len(outcomes)} JSON files: {len(configs)} HydraGNN training configs, "
          f"{sum(o.kind == 'not a config' for o in outcomes)} not configs, "
          f"{sum(o.kind == 'invalid JSON' for o in outcomes)} invalid JSON")
    print(f"loaded {len(loaded)} of {len(configs)} configs ({len(warned)} with a warning); "
          f"refused {len(configs) - len(loaded)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
