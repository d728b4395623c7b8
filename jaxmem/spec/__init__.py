"""Sweep specs: TOML parsed and validated as typed structures before anything compiles (`sweep`), and the safe
arithmetic expressions they contain (`expr`)."""
