"""What survives a crash: the results store, in-flight checkpoints, the output-folder lock, per-process shards."""
