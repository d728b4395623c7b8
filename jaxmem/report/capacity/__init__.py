"""Search sweeps: capacity (or threshold) per grid point over seeds, power-law fits, collapse, bits per
parameter, capacity.png and their report.md sections."""
