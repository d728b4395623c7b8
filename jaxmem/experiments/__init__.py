"""Experiment families, one folder per paper; `interface` is what a family writes, `registry` finds them."""
