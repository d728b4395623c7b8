"""The persistent compilation cache: on by default, reused by a repeated sweep, and switched off on request."""

from pathlib import Path

import pandas as pd
import pytest

import jaxmem
from helpers import ROOT, jaxmem_cli
from jaxmem.cli.status import status
from jaxmem.engine.compile_cache import cache_dir

HEBBIAN = ROOT / "tests" / "specs" / "tiny_hebbian.toml"  # eval-only: its two compiles dominate its time


def run(out, cache: Path, *flags, **env) -> None:
    process = jaxmem_cli(
        "run", HEBBIAN, "--out", out, "--quiet", *flags, env_extra={"JAXMEM_CACHE_DIR": str(cache), **env}
    )
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 0, output


def entries(cache: Path) -> set[str]:
    return {p.name for p in cache.iterdir()} if cache.is_dir() else set()


def results(out) -> pd.DataFrame:
    runs = jaxmem.load_results(out).drop(columns=["wall_time_s", "finished_at"])
    return runs.sort_values("run_id").reset_index(drop=True)


def compile_seconds(out) -> float:
    return float(jaxmem.load_results(out, "compiles")["seconds"].sum())


def test_cache_location_and_opt_out():
    assert cache_dir({"JAXMEM_CACHE_DIR": "/tmp/x"}) == Path("/tmp/x")
    assert cache_dir({"XDG_CACHE_HOME": "/xdg"}) == Path("/xdg/jaxmem/xla")
    assert cache_dir({}) == Path.home() / ".cache" / "jaxmem" / "xla"
    for off in ("0", "false", "off", "no"):
        assert cache_dir({"JAXMEM_COMPILE_CACHE": off, "JAXMEM_CACHE_DIR": "/tmp/x"}) is None
    assert cache_dir({"JAXMEM_COMPILE_CACHE": "1", "JAXMEM_CACHE_DIR": "/tmp/x"}) == Path("/tmp/x")


def test_a_repeated_sweep_loads_its_programs_from_the_cache(tmp_path):
    cache = tmp_path / "cache"
    run(tmp_path / "cold", cache)
    cold = entries(cache)
    assert len(cold) >= 2, "every bucket's program is cached, fast compiles included"
    run(tmp_path / "warm", cache)
    assert entries(cache) == cold, "the second run compiled something again"
    assert compile_seconds(tmp_path / "warm") < compile_seconds(tmp_path / "cold")
    pd.testing.assert_frame_equal(results(tmp_path / "warm"), results(tmp_path / "cold"))
    compiles = len(jaxmem.load_results(tmp_path / "warm", "compiles"))
    assert f"0 loaded from the persistent compile cache ({cache})" in status(tmp_path / "cold")
    assert f"{compiles} loaded from the persistent compile cache ({cache})" in status(tmp_path / "warm")


@pytest.mark.parametrize("how", ["flag", pytest.param("env", marks=pytest.mark.slow)])  # env: the same switch
def test_the_cache_can_be_switched_off(tmp_path, how):
    cache = tmp_path / "cache"
    if how == "flag":
        run(tmp_path / "out", cache, "--no-compile-cache")
    else:
        run(tmp_path / "out", cache, JAXMEM_COMPILE_CACHE="0")
    assert not entries(cache)
    assert "persistent compile cache off" in status(tmp_path / "out")
