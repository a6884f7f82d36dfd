"""One module per sub-command; see ``hydragnn_ensemble.cli`` for the template."""
