"""Planning: runs with stable identities, buckets of one static shape, padding ladders (`buckets`), and which
evaluations a trajectory keeps (`trajectory_grid`)."""
