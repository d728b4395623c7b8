"""Grid sweeps without a search: per-point metrics, the heatmap, its floor and boundary trade-off, the
phase diagram of the success rate, heatmap.png and their report.md sections."""
