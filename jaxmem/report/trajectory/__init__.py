"""Sweeps with recorded trajectories: the wide trajectory table, stages and crossings, the escape-time
law, rates and trends, their plots and report.md sections."""
