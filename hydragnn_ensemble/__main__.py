"""``python -m hydragnn_ensemble`` is the same as the ``hydragnn-ensemble`` console script."""

from hydragnn_ensemble.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
