"""Search sweeps: capacity (or threshold) per grid point over seeds, power-law and linear fits, per-point
ratios, collapse, bits per parameter, the success map of the probes, capacity.png and their report.md
sections."""
