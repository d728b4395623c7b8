"""Checks of the sampled instances: host reference re-solves and rejected instances."""
