"""Multi-process runs: 2 processes on localhost give the results of one; partition, merge and errors."""

import json
import signal
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import jax
import numpy as np
import pandas as pd
import pytest

import jaxmem
from helpers import RESULT_COLUMNS, TINY_SPEC, jaxmem_cli
from jaxmem.cli.main import main
from jaxmem.cli.status import status
from jaxmem.cli.supervise import forwarded, multi_process, outcome
from jaxmem.driver.distributed import (
    LEFT,
    PEER_TIMEOUT_S,
    Cluster,
    DistributedError,
    cluster_from,
    lost_text,
    owned,
    seen_at,
    silent,
)
from jaxmem.driver.sweep import EXIT_TERMINATED, run_sweep
from jaxmem.persistence.local_checkpoints import LocalSlotCheckpoints
from jaxmem.persistence.lock import OutputLock
from jaxmem.persistence.progress import PLANNED, planned
from jaxmem.persistence.shards import merge_shards, shard_dir
from jaxmem.spec.sweep import load
from jaxmem.persistence.store import Store, StoreError

EXIT_DISTRIBUTED = 5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_job(out, count: int = 2, *extra) -> list:
    """Start the tiny sweep as `count` processes of one job on localhost (one CPU device each)."""
    coordinator = f"127.0.0.1:{free_port()}"
    return [
        jaxmem_cli(
            "run",
            TINY_SPEC,
            "--out",
            out,
            "--quiet",
            "--coordinator",
            coordinator,
            "--num-processes",
            count,
            "--process-id",
            i,
            *extra,
        )  # fmt: skip
        for i in range(count)
    ]


def finish(processes, timeout: float = 300) -> list[tuple[int, str]]:
    """Wait for every process, reading their outputs together (a full pipe would block a job)."""
    with ThreadPoolExecutor(len(processes)) as pool:
        outputs = list(pool.map(lambda p: p.communicate(timeout=timeout)[0], processes))
    return [(p.returncode, output) for p, output in zip(processes, outputs)]


def tables(out) -> dict[str, pd.DataFrame]:
    return {
        "runs": jaxmem.load_results(out).set_index("run_id").sort_index()[RESULT_COLUMNS + ["value", "bucket"]],
        "searches": jaxmem.load_results(out, "searches").set_index("unit").sort_index(),
        "trajectories": jaxmem.load_results(out, "trajectories").set_index(["run_id", "step"]).sort_index(),
    }


def assert_same_results(out, reference) -> None:
    got = tables(out)
    for name, frame in reference.items():
        pd.testing.assert_frame_equal(got[name], frame, obj=name)


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    out = tmp_path_factory.mktemp("single")
    run_sweep(load(TINY_SPEC), out, quiet=True)
    return tables(out)


# -- settings and partition -------------------------------------------------------------------------
def test_cluster_from_flags_then_environment():
    env = {"JAXMEM_COORDINATOR": "10.0.0.1:7777", "JAXMEM_NUM_PROCESSES": "4", "JAXMEM_PROCESS_ID": "3"}
    assert cluster_from(environ={}) is None
    assert cluster_from(environ=env) == Cluster("10.0.0.1:7777", 4, 3)
    assert cluster_from("h:1", 2, 0, environ=env) == Cluster("h:1", 2, 0)  # flags win
    assert cluster_from("h:1", 1, 0, environ={}) is None  # one process: no distributed runtime
    assert cluster_from("auto", environ={}) == Cluster("auto", None, None)


@pytest.mark.parametrize(
    "args, message",
    [
        (("h:1", 2, 2), "--process-id 2 is out of range for --num-processes 2 (0 to 1)"),
        (("h:1", 0, 0), "--num-processes must be >= 1"),
        (("h:1", 2, None), "missing: --process-id"),
        (("nohost", 2, 0), "--coordinator must be HOST:PORT"),
        (("h:99999", 2, 0), "--coordinator must be HOST:PORT"),
    ],
)
def test_bad_settings_are_refused_with_the_reason(args, message):
    with pytest.raises(DistributedError, match=message.replace("(", r"\(").replace(")", r"\)")):
        cluster_from(*args, environ={})


def test_units_are_partitioned_disjointly_and_completely():
    units = list(range(11))
    shares = [owned(units, i, 3) for i in range(3)]
    assert sorted(u for share in shares for u in share) == units
    assert [len(s) for s in shares] == [4, 4, 3]
    assert shares == [owned(units, i, 3) for i in range(3)]


def test_a_peer_whose_beat_stops_is_lost_after_the_timeout_and_one_that_left_never_is():
    """Was: a killed process went unnoticed until the runtime aborted the others (SIGABRT, a C++ trace)."""
    seen = seen_at({1: (None, 0.0), 2: (None, 0.0), 3: (None, 0.0)}, {1: "7", 2: "7"}, now=1.0)
    seen = seen_at(seen, {1: "8", 2: LEFT}, now=2.0)  # 1 beats on, then stops; 2 leaves; 3 never beats
    assert silent(seen, now=PEER_TIMEOUT_S - 0.5) == [] and silent(seen, now=PEER_TIMEOUT_S) == [3]
    assert silent(seen_at(seen, {1: "8", 2: LEFT}, now=2.0 + PEER_TIMEOUT_S), now=2.0 + PEER_TIMEOUT_S) == [1, 3]
    assert lost_text([1], 2).startswith("process 1 of 2 stopped answering")


# -- the supervisor of a multi-process run -------------------------------------------------------------
RUNTIME_ABORT = [  # process 1's native stderr when process 0 died (jaxlib 0.10.2), shortened
    "W1129 04:32:52.176354   13285 preemption_sync_manager.cc:147] Failed to retrieve preemption notice from "
    "coordination service: UNAVAILABLE: recvmsg:Connection reset by peer\n",
    "Additional GRPC error information from remote target coordination_service while calling GetKeyValue:\n",
    ':UNKNOWN:Error received from peer  {grpc_status:14, grpc_message:"recvmsg:Connection reset by peer"}\n',
    "E1129 04:32:52.176392   13285 preemption_sync_manager.cc:159] Failed to cancel preemption barrier\n",
    "E1129 04:26:59.355806   10308 coordination_service_agent.cc:289] Polled an error from coordination service\n",
    "F1129 04:26:59.355844   10308 client.h:80] Terminating process because the JAX distributed service detected "
    "fatal errors. absl::Status: UNAVAILABLE: Failed to send RPC to coordination service.\n",
    ':UNKNOWN:Error received from peer  {grpc_status:14, grpc_message:"Socket closed"}\n',
    "*** Check failure stack trace: ***\n",
    "    @     0x7f33a8040634  absl::lts_20260107::log_internal::LogMessage::SendToLog()\n",
]


def test_the_supervisor_drops_the_runtimes_abort_and_forwards_the_rest():
    """Was: the runtime's fatal log, a C++ stack trace and its log lines of the lost connection."""
    other = "W1129 04:20:00.000001   10300 cpu_client.cc:12] some other warning\n"
    shown = []
    abort = forwarded(["plain line\n", other, *RUNTIME_ABORT], shown.append)
    assert abort == RUNTIME_ABORT[5] and "".join(shown) == f"plain line\n{other}"
    shown = []  # the runtime's log lines without an abort: held back until another log line, or the end
    assert forwarded([RUNTIME_ABORT[0], RUNTIME_ABORT[1], other, RUNTIME_ABORT[4]], shown.append) is None
    assert "".join(shown) == "".join([RUNTIME_ABORT[0], RUNTIME_ABORT[1], other, RUNTIME_ABORT[4]])


def test_the_supervisor_says_the_runtimes_abort_in_one_line_and_passes_other_endings_on():
    will = "jaxmem: error: process 0 of 2 (the coordinator) stopped answering (...); resume with `...`"
    assert outcome(-signal.SIGABRT, RUNTIME_ABORT[5], will) == (EXIT_DISTRIBUTED, will)
    code, line = outcome(-signal.SIGABRT, RUNTIME_ABORT[5], "")  # it aborted before its last words
    assert code == EXIT_DISTRIBUTED and line.startswith("jaxmem: error: JAX's runtime ended this process: Terminat")
    assert line.endswith("Failed to send RPC to coordination service.")
    for code in (0, 2, 3, 4, 5, 6, 130, 143):
        assert outcome(code, None, will) == (code, "")
    assert outcome(-signal.SIGKILL, None, will) == (137, "") and outcome(-signal.SIGABRT, None, will) == (134, "")


def test_only_a_multi_process_run_is_supervised():
    run = ["run", "spec.toml", "--out", "o"]
    assert multi_process([*run, "--coordinator", "h:1"], {}) and multi_process([*run, "--coordinator=auto"], {})
    assert multi_process(run, {"JAXMEM_COORDINATOR": "h:1"}) and not multi_process(run, {})
    assert not multi_process([*run, "--coordinator-timeout", "5"], {})
    assert not multi_process(["status", "--coordinator", "h:1"], {}) and not multi_process([], {})


# -- the store shards ---------------------------------------------------------------------------------
def fake_run(run_id: str) -> dict:
    return {
        "run_id": run_id, "point": "p", "seed": 0, "lr": 0.1, "config": {"d": 8}, "bucket": "b",
        "max_metric": 1.0, "diverged": False, "success": True,
    }  # fmt: skip


def make_shard(out, process_id: int, run_ids, fingerprint="f") -> None:
    directory = shard_dir(out, process_id)
    directory.mkdir(parents=True)
    store = Store(directory)
    store.set_meta({"fingerprint": fingerprint})
    store.add_runs([fake_run(r) for r in run_ids], [(r, 0, {"loss": 1.0}) for r in run_ids])
    store.add_compile("b", {"d": 8}, 4, 1.5, 100.0 + process_id)
    store.close()


def test_merging_shards_is_idempotent_and_refuses_another_sweep(tmp_path):
    make_shard(tmp_path, 0, ["a", "b"])
    make_shard(tmp_path, 1, ["b", "c"])  # a run stored twice (a resumed job) is merged once
    store = Store(tmp_path)
    store.set_meta({"fingerprint": "f"})
    assert merge_shards(store, tmp_path) == 3
    assert merge_shards(store, tmp_path) == 0  # again, as after a crash between merge and deletion
    assert len(store.table("runs")) == 3 and len(store.table("trajectories")) == 3
    assert len(store.table("compiles")) == 2
    assert merge_shards(store, tmp_path, remove=True) == 0
    assert not (tmp_path / "shards").exists()
    make_shard(tmp_path, 0, ["d"], fingerprint="other")
    with pytest.raises(StoreError, match="different sweep"):
        merge_shards(store, tmp_path)
    store.close()


def test_merging_shards_into_a_full_store_says_so_and_keeps_both(tmp_path):
    """Was: sqlite3.OperationalError 'database or disk is full' (here from max_page_count) out of the merge."""
    make_shard(tmp_path, 0, [f"r{i}" for i in range(200)])
    store = Store(tmp_path)
    store.set_meta({"fingerprint": "f"})
    store.db.execute(f"PRAGMA max_page_count = {store.db.execute('PRAGMA page_count').fetchone()[0]}")
    with pytest.raises(StoreError, match=f"^no space left on {tmp_path} "):
        merge_shards(store, tmp_path, remove=True)
    assert len(store.table("runs")) == 0 and (shard_dir(tmp_path, 0) / "results.sqlite").is_file()
    store.close()


def test_status_counts_the_runs_in_the_shards_a_stopped_job_left(tmp_path):
    """Was: 'not started ... 0 runs done' while the shards of a job whose process died held its runs."""
    store = Store(tmp_path)
    store.set_meta({PLANNED: planned(points=2, seeds=2, learning_rates=1, search=False)})
    store.close()
    make_shard(tmp_path, 0, ["a", "b"])
    make_shard(tmp_path, 1, ["b", "c"])
    lines = status(tmp_path).splitlines()
    assert lines[0].endswith("interrupted") and lines[1].startswith("3 of 4 runs done")
    assert lines[2].startswith("compiles: 2") and "resume with `jaxmem run" in lines[3]


# -- process-local checkpoints ---------------------------------------------------------------------------
def test_local_checkpoints_round_trip_keep_two_and_skip_a_damaged_one(tmp_path):
    sharding = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    abstract = {
        "w": jax.ShapeDtypeStruct((3, 2), np.float32, sharding=sharding),
        "n": jax.ShapeDtypeStruct((3,), np.int32),
    }
    checkpoints = LocalSlotCheckpoints(tmp_path / "c")
    for step in range(3):
        checkpoints.save({"w": np.full((3, 2), step, np.float32), "n": np.arange(3, dtype=np.int32)}, {"step": step})
    assert checkpoints.steps() == [2, 3]
    state, meta = checkpoints.restore(abstract)
    assert meta == {"step": 2} and float(state["w"][0, 0]) == 2.0 and state["w"].sharding == sharding
    archive = tmp_path / "c" / "3" / "state.npz"
    archive.write_bytes(archive.read_bytes()[:-40])  # truncated
    state, meta = checkpoints.restore(abstract)
    assert meta == {"step": 1} and checkpoints.steps() == [2]
    checkpoints.close(remove=True)
    assert not (tmp_path / "c").exists()


# -- CLI errors -----------------------------------------------------------------------------------------
def test_out_of_range_process_id_and_unreachable_coordinator_exit_clearly(tmp_path, capsys):
    base = ["run", str(TINY_SPEC), "--out", str(tmp_path / "out"), "--quiet", "--num-processes", "2"]
    assert main(base + ["--coordinator", "127.0.0.1:1234", "--process-id", "5"]) == EXIT_DISTRIBUTED
    assert "--process-id 5 is out of range" in capsys.readouterr().err
    started = time.time()
    code = main(base + ["--coordinator", f"127.0.0.1:{free_port()}", "--process-id", "1", "--coordinator-timeout", "2"])
    assert code == EXIT_DISTRIBUTED and time.time() - started < 30
    assert "cannot reach the coordinator" in capsys.readouterr().err


def test_a_job_on_a_folder_in_use_stops_every_process_with_the_reason(tmp_path):
    out = tmp_path / "busy"
    with OutputLock(out):
        (code0, out0), (code1, out1) = finish(start_job(out), timeout=120)
    assert code0 == 3 and "in use by another jaxmem run" in out0
    assert code1 == EXIT_DISTRIBUTED and "process 0: LockError" in out1


# -- two processes, one result ----------------------------------------------------------------------------
@pytest.mark.slow  # 15 s: two processes compile the same sweep
def test_two_processes_give_the_results_of_one(tmp_path, single):
    out = tmp_path / "two"
    processes = start_job(out)
    (code0, out0), (code1, out1) = finish(processes)
    assert code0 == 0, out0
    assert code1 == 0, out1
    assert "report:" in out0 and "process 0 merged the results" in out1
    assert_same_results(out, single)
    assert not (out / "shards").exists(), "merged shards are deleted"
    assert set(jaxmem.load_results(out)["device"]) == {"cpu:1"}
    meta = jaxmem.load_results(out, "meta").set_index("key")["value"]
    assert "in each of 2 processes" in meta["device"]
    assert json.loads(meta["resolved_spec"])["experiment"] == "assoc_memory"
    assert (out / "report.md").is_file()


@pytest.mark.slow  # 20-35 s; single-process stops and resumes stay in the default set (test_resume.py)
def test_a_stopped_job_resumes_from_its_shards_and_checkpoints(tmp_path, single):
    """SIGTERM to both processes mid-sweep: each saves and exits 143, process 0 merges what is done
    and keeps the shards (with the in-flight checkpoints); rerunning the job finishes identically."""
    out = tmp_path / "stopped"
    processes = start_job(out)
    deadline = time.time() + 120
    while time.time() < deadline and not any((out / "shards").glob("p*/checkpoints/*/*")):
        time.sleep(0.1)
    for p in processes:
        p.send_signal(signal.SIGTERM)
    assert [code for code, _ in finish(processes)] == [EXIT_TERMINATED, EXIT_TERMINATED]
    assert len(jaxmem.load_results(out)) > 0, "process 0 merged the runs finished before the stop"
    assert any((out / "shards").glob("p*/checkpoints/*/*")), "the shards keep their in-flight checkpoints"
    assert [code for code, _ in finish(start_job(out))] == [0, 0]
    assert_same_results(out, single)


@pytest.mark.slow  # 35-45 s: the survivor waits PEER_TIMEOUT_S (20 s) for the dead process's beat
def test_a_killed_process_stops_the_other_with_one_line_and_the_job_resumes(tmp_path, single):
    """kill -9 of process 1 mid-sweep: process 0 exits 5 within 60 s, naming process 1 and the resume
    command, without the runtime's C++ abort (was: exit 134 with a stack trace after 100 s, then status
    'not started ... 0 runs done' beside shards holding the runs); its resume equals an undisturbed run."""
    out = tmp_path / "killed"
    first, second = start_job(out)
    deadline = time.time() + 120
    while time.time() < deadline and not any((out / "shards" / "p1").glob("checkpoints/*/*")):
        time.sleep(0.1)
    second.kill()
    killed = time.time()
    [(code, output)] = finish([first], timeout=90)
    assert code == EXIT_DISTRIBUTED and time.time() - killed < 60, output
    assert "Check failure" not in output and "Terminating process" not in output
    [line] = [line for line in output.splitlines() if line.startswith("jaxmem: ")]
    assert "process 1 of 2 stopped answering" in line and f"resume with `jaxmem run {TINY_SPEC} --out {out}`" in line
    stored = int(status(out).splitlines()[1].split()[0])
    assert stored > 0, "status counts the runs in the shards"
    assert finish([jaxmem_cli("run", TINY_SPEC, "--out", out, "--quiet")])[0][0] == 0  # one process resumes
    assert_same_results(out, single)


@pytest.mark.slow  # 25-50 s: the job until process 1 holds a checkpoint, then a one-process resume
def test_a_killed_process_0_stops_the_other_with_one_line_and_the_job_resumes(tmp_path, single):
    """kill -9 of process 0 (the runtime's coordination service) mid-sweep: process 1 exits 5 at once with
    one line naming it, where process 1 keeps its runs and the resume command (was: exit 134 with the
    runtime's fatal log and a C++ stack trace); status counts the shards' runs; the resume equals an
    undisturbed run."""
    out = tmp_path / "killed0"
    first, second = start_job(out)
    deadline = time.time() + 120
    while time.time() < deadline and not any((out / "shards" / "p1").glob("checkpoints/*/*")):
        time.sleep(0.1)
    first.kill()
    killed = time.time()
    [(code, output)] = finish([second], timeout=90)
    first.wait()
    assert code == EXIT_DISTRIBUTED and time.time() - killed < 60, output
    assert "Check failure" not in output and "coordination service" not in output
    [line] = [line for line in output.splitlines() if line.startswith("jaxmem: ")]
    assert line.startswith("jaxmem: error: process 0 of 2 (the coordinator) stopped answering")
    assert f"keeping its finished runs in {shard_dir(out, 1)}" in line
    assert f"resume with `jaxmem run {TINY_SPEC} --out {out}`" in line
    assert int(status(out).splitlines()[1].split()[0]) > 0, "status counts the runs in the shards"
    assert finish([jaxmem_cli("run", TINY_SPEC, "--out", out, "--quiet")])[0][0] == 0  # one process resumes
    assert_same_results(out, single)
