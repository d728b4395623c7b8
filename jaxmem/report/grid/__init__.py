"""Grid sweeps without a search: per-point metrics, the heatmap, its floor and boundary trade-off,
heatmap.png and their report.md sections."""
