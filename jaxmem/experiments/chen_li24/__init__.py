"""Chen & Li (2024), "Provably learning a multi-head attention layer" (spec 003): teacher–student
multi-head attention, the Phase I moment estimator and the parity hard instances."""
