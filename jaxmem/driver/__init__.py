"""The sweep driver (`sweep`): threshold searches on the host (`search`), progress, and multi-process runs
(`distributed`, `multihost`)."""

# the multi-process settings' environment variables; here, not in `distributed` (which imports JAX), for the
# `jaxmem` command's supervisor of a multi-process run (jaxmem.cli.supervise), which must stay light
COORDINATOR_ENV, COUNT_ENV, INDEX_ENV = "JAXMEM_COORDINATOR", "JAXMEM_NUM_PROCESSES", "JAXMEM_PROCESS_ID"
