"""The engine: one compiled, vmapped, sharded program per bucket (`program`), its host-side slots and queue
(`executor`), device memory budgets (`device_memory`) and the persistent compile cache (`compile_cache`)."""
