"""The sweep driver (`sweep`): threshold searches on the host (`search`), progress, and multi-process runs
(`distributed`, `multihost`)."""
