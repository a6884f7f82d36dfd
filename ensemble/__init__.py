"""Top-K and greedy selection, the ensemble predictor with uncertainty, ASE calculator, calibration,
and export of top-K configurations."""
