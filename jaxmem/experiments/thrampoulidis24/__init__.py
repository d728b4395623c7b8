"""Thrampoulidis (2024): implicit bias of next-token prediction (the family, its in-program geometry, float64
host references and figures)."""
