"""Which evaluations a trajectory keeps (jaxmem.trajectory)."""

from jaxmem.plan.trajectory_grid import kept, on_grid


def test_every_evaluation_is_kept_without_a_log_grid():
    assert all(kept(step, 10, 0) for step in range(0, 1000, 10))


def test_log_grid_keeps_about_k_points_per_decade():
    steps = [s for s in range(0, 100_001, 10) if kept(s, 10, 4)]
    assert steps[:3] == [0, 10, 20]  # the first decade is as fine as the evaluations allow
    per_decade = [sum(10**e <= s < 10 ** (e + 1) for s in steps) for e in range(2, 5)]
    assert per_decade == [4, 4, 4]
    assert 100_000 in steps


def test_on_grid_filters_points_and_keeps_their_metrics():
    points = [("a", s, {"loss": float(s)}) for s in range(0, 1001, 100)]
    assert [p[1] for p in on_grid(points, 100, 1)] == [0, 100, 1000]
    assert on_grid(points, 100, 0) == points
