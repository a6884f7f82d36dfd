"""Search spaces over HydraGNN config keys, optimizer backends behind one ask/tell interface, and the
campaign journal and results table."""
