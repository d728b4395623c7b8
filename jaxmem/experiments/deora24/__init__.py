"""Deora, Ghaderi, Taheri & Thrampoulidis (2024): optimisation and generalisation of multi-head attention
against the number of heads (spec 002)."""
