"""The adversarial user's attack list, rerun on the current code: every attack through the real `jaxmem`
command in its own process, with what it must and did end in. Writes RESULTS_attacks.md.

    python benchmarks/attacks.py [--kills 20] [--out benchmarks/RESULTS_attacks.md]

The attacks run on tests/specs/tiny_kill.toml (a threshold search per seed, trajectories, segments of
0.05 s); the reference is one uninterrupted run, and "agrees" means `jaxmem compare` finds no difference.
The full-disk attacks need `mount -t tmpfs` (root); without it they are reported as not run.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from concurrent import futures
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SPEC = ROOT / "tests" / "specs" / "tiny_kill.toml"
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "JAXMEM_STALL_AFTER_S": "2"}
ROWS: list[list[str]] = []


def jaxmem(*args, cwd=ROOT, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "jaxmem.cli", *map(str, args)],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def started(*args, cwd=ROOT) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "jaxmem.cli", *map(str, args)],
        cwd=cwd,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def said(result) -> str:
    """The first line of a command's error, or its last line."""
    text = (result.stderr or "") + (result.stdout or "")
    errors = [line for line in text.splitlines() if line.startswith("jaxmem: ")]
    lines = errors or [line for line in text.splitlines() if line.strip()] or [""]
    return lines[0][:220].replace("|", "\\|")


def record(attack: str, expected: str, ok: bool, outcome: str) -> None:
    ROWS.append([attack, expected, outcome.replace("\n", " ")[:300], "PASS" if ok else "**FAIL**"])
    print(f"[attack] {'PASS' if ok else 'FAIL'}: {attack}: {outcome[:200]}", file=sys.stderr, flush=True)


def agrees(out: Path, reference: Path) -> tuple[bool, str]:
    result = jaxmem("compare", out, reference)
    return result.returncode == 0, result.stdout.strip().splitlines()[-1] if result.stdout.strip() else said(result)


def stored_runs(out: Path) -> int:
    try:
        with sqlite3.connect(f"file:{out / 'results.sqlite'}?mode=ro", uri=True) as db:
            return db.execute("select count(*) from runs").fetchone()[0]
    except sqlite3.Error:
        return 0


def wait_until(ready, child: subprocess.Popen | None = None, timeout: float = 120) -> None:
    """Poll `ready()` every 0.05 s until it holds, `child` (if given) has exited, or `timeout` s passed."""
    deadline = time.time() + timeout
    while not ready() and time.time() < deadline and (child is None or child.poll() is None):
        time.sleep(0.05)


def kill_nine(tmp: Path, reference: Path, kills: int) -> None:
    out, rng, landed = tmp / "kill9", random.Random(6), 0
    for _ in range(kills):
        child = started("run", SPEC, "--out", out, "--quiet")
        time.sleep(rng.uniform(0.5, 4.0))
        if child.poll() is not None:
            break
        child.send_signal(signal.SIGKILL)
        child.wait()
        landed += 1
    final = jaxmem("run", SPEC, "--out", out, "--quiet")
    same, words = agrees(out, reference)
    record(
        f"kill -9 × {landed} at random times, then rerun",
        "exit 0; compare agrees",
        final.returncode == 0 and same,
        f"exit {final.returncode}; {words}",
    )


def stop_with(tmp: Path, reference: Path, sig: signal.Signals, code: int) -> None:
    out = tmp / f"stop-{sig.name}"
    child = started("run", SPEC, "--out", out, "--quiet")
    wait_until(lambda: stored_runs(out) >= 4, child)
    child.send_signal(sig)
    output, _ = child.communicate(timeout=120)
    resumed = jaxmem("run", SPEC, "--out", out, "--quiet")
    same, words = agrees(out, reference)
    record(
        f"{sig.name} mid-sweep, then rerun",
        f"exit {code}; rerun exit 0; compare agrees",
        child.returncode == code and resumed.returncode == 0 and same,
        f"exit {child.returncode} ({said(subprocess.CompletedProcess([], 0, output, ''))}); rerun exit "
        f"{resumed.returncode}; {words}",
    )


def concurrent(tmp: Path) -> None:
    """A second run while the first (long: 100,000-step budgets) is storing results, then the first stopped."""
    out, long = tmp / "concurrent", ("--set", "train.steps=100000")
    first = started("run", SPEC, "--out", out, "--quiet", *long)
    wait_until(lambda: (out / "checkpoints").is_dir(), first)
    second = jaxmem("run", SPEC, "--out", out, "--quiet", *long)
    first.send_signal(signal.SIGTERM)
    first.communicate(timeout=300)
    record(
        "a second run into a folder in use",
        "exit 3 naming the holder",
        second.returncode == 3,
        f"exit {second.returncode}: {said(second)}",
    )


def damaged_store(tmp: Path, reference: Path) -> None:
    out = tmp / "flipped"
    shutil.copytree(reference, out)
    with sqlite3.connect(out / "results.sqlite") as db:  # a changed value, not through jaxmem: a flipped bit
        db.execute("drop trigger if exists runs_checksum")
        db.execute("update runs set max_metric = max_metric + 1 where rowid = 1")
    status = jaxmem("status", out)
    rerun = jaxmem("run", SPEC, "--out", out, "--quiet")
    same, words = agrees(out, reference)
    record(
        "a changed value in the store",
        "status exit 4 naming it; run moves it aside, recomputes; agrees",
        status.returncode == 4 and rerun.returncode == 0 and same,
        f"status exit {status.returncode}: {said(status)}; run exit {rerun.returncode}; {words}",
    )
    out = tmp / "deleted"
    shutil.copytree(reference, out)
    with sqlite3.connect(out / "results.sqlite") as db:
        db.execute("delete from runs where rowid in (select rowid from runs limit 5)")
    status, rerun = jaxmem("status", out), jaxmem("run", SPEC, "--out", out, "--quiet")
    record(
        "5 rows deleted from the store",
        "status and run exit 4 naming the table",
        status.returncode == 4 and rerun.returncode == 4 and "runs" in said(status),
        f"status exit {status.returncode}: {said(status)}; run exit {rerun.returncode}",
    )
    out = tmp / "empty"
    out.mkdir()
    (out / "results.sqlite").write_bytes(b"")
    status, report = jaxmem("status", out), jaxmem("report", out)
    record(
        "a 0-byte results file",
        "status and report exit 4, no traceback",
        status.returncode == report.returncode == 4 and "Traceback" not in status.stderr + report.stderr,
        f"status exit {status.returncode}: {said(status)}; report exit {report.returncode}",
    )


def damaged_checkpoints(tmp: Path, reference: Path) -> None:
    out = tmp / "checkpoint"
    child = started("run", SPEC, "--out", out, "--quiet")
    wait_until(lambda: any((out / "checkpoints").glob("*/*")), child)
    child.send_signal(signal.SIGTERM)
    child.communicate(timeout=120)
    damaged = 0
    for file in (out / "checkpoints").rglob("*"):
        if file.is_file() and file.stat().st_size > 0:
            file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])
            damaged += 1
    rerun = jaxmem("run", SPEC, "--out", out, "--quiet")
    same, words = agrees(out, reference)
    record(
        f"every checkpoint file truncated ({damaged} files) after SIGTERM",
        "rerun exit 0; agrees",
        rerun.returncode == 0 and same,
        f"rerun exit {rerun.returncode}; {words}",
    )


def mounted_tmpfs(mount: Path, size: str) -> bool:
    """Whether a tmpfs of `size` could be mounted on a new folder `mount` (root only; the caller unmounts)."""
    mount.mkdir()
    command = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)]
    return subprocess.run(command, capture_output=True).returncode == 0


def full_disk(tmp: Path, reference: Path) -> None:
    mount = tmp / "small"
    if not mounted_tmpfs(mount, "2m"):
        record("a full disk", "exit 4 'no space left'", True, "not run: mount -t tmpfs is not permitted here")
        return
    try:
        out = mount / "out"
        shutil.copytree(reference, out)
        filler = mount / "filler"
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True)
        rerun, status = jaxmem("run", SPEC, "--out", out, "--quiet"), jaxmem("status", out)
        kept = not list(mount.glob("out/results.sqlite.corrupt*"))
        filler.unlink()
        after = jaxmem("run", SPEC, "--out", out, "--quiet")
        same, words = agrees(out, reference)
        record(
            "a full disk under a finished store",
            "exit 4 'no space left'; never moved aside; after room is made: nothing to run, agrees",
            rerun.returncode == 4 and "no space left" in said(rerun) and kept and after.returncode == 0 and same,
            f"run exit {rerun.returncode}: {said(rerun)}; status exit {status.returncode}; moved aside: "
            f"{not kept}; after room: exit {after.returncode}, {words}",
        )
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)


def read_only(tmp: Path, reference: Path) -> None:
    """A read-only bind mount of a finished folder (root writes through file modes, not through that)."""
    source, out = tmp / "readonly-source", tmp / "readonly"
    shutil.copytree(reference, source)
    out.mkdir()
    mounted = not subprocess.run(["mount", "--bind", str(source), str(out)], capture_output=True).returncode
    if not mounted or subprocess.run(["mount", "-o", "remount,ro,bind", str(out)], capture_output=True).returncode:
        record("a read-only output folder", "status exit 0; run exit 4", True, "not run: bind mounts not permitted")
        return
    try:
        status, rerun = jaxmem("status", out), jaxmem("run", SPEC, "--out", out, "--quiet")
        record(
            "a read-only mount of a finished folder",
            "status exit 0; run exit 4 naming it",
            status.returncode == 0 and rerun.returncode == 4,
            f"status exit {status.returncode}; run exit {rerun.returncode}: {said(rerun)}",
        )
    finally:
        subprocess.run(["umount", str(out)], capture_output=True)


def bad_input(tmp: Path) -> None:
    cases = [
        ("--set seeds=x", ["run", SPEC, "--set", "seeds=x", "--out", tmp / "b1"], 2),
        ("--set grid.d=[-1]", ["run", SPEC, "--set", "fixed.d=-1", "--out", tmp / "b2"], 2),
        ("--set on an unknown key", ["run", SPEC, "--set", "train.stepz=3", "--out", tmp / "b3"], 2),
        ("an unknown experiment", ["run", "no_such_sweep"], 2),
        ("a 256-character --out", ["run", SPEC, "--out", tmp / ("x" * 256)], 2),
        ("--out naming a file", ["run", SPEC, "--out", SPEC], 2),
        ('--out ""', ["run", SPEC, "--out", ""], 2),
        ("status of a folder with no results", ["status", tmp], 2),
    ]
    for attack, args, code in cases:
        result = jaxmem(*args)
        ok = result.returncode == code and "Traceback" not in result.stderr
        record(attack, f"exit {code}, one line, no traceback", ok, f"exit {result.returncode}: {said(result)}")
    out = tmp / "lock-random"
    out.mkdir()
    (out / ".lock").write_bytes(os.urandom(64))
    result = jaxmem("run", SPEC, "--out", out, "--quiet")
    record(
        "a .lock holding random bytes",
        "exit 0, taken over with a warning",
        result.returncode == 0,
        f"exit {result.returncode}: {said(result)}",
    )


def edited_experiment(tmp: Path) -> None:
    """examples/relu_teacher run into a folder, its loss multiplied by 100, rerun into the same folder."""
    folder = tmp / "edited"
    folder.mkdir()
    for name in ("relu_teacher.py", "relu_teacher.toml"):
        shutil.copy(ROOT / "examples" / name, folder / name)
    out, spec = folder / "out", folder / "relu_teacher.toml"
    first = jaxmem("run", spec, "--out", out, "--quiet", cwd=folder)
    again = jaxmem("run", spec, "--out", out, "--quiet", cwd=folder)
    source = folder / "relu_teacher.py"
    source.write_text(source.read_text().replace('/ (2 * dyn["n"])', '/ (2 * dyn["n"]) * 100'))
    edited, status = jaxmem("run", spec, "--out", out, "--quiet", cwd=folder), jaxmem("status", out, cwd=folder)
    restarted = jaxmem("run", spec, "--out", out, "--quiet", "--restart", cwd=folder)
    warned = [line for line in status.stdout.splitlines() if "experiment code" in line]
    record(
        "examples/relu_teacher's loss × 100 between two runs into one folder",
        "exit 4 naming the module; status says the code changed; unchanged code resumes; --restart starts over",
        first.returncode == again.returncode == restarted.returncode == 0
        and edited.returncode == 4
        and "relu_teacher" in said(edited)
        and "CHANGED" in " ".join(warned),
        f"unchanged rerun exit {again.returncode}; edited rerun exit {edited.returncode}: {said(edited)}; "
        f"status: {' '.join(warned)}; --restart exit {restarted.returncode}",
    )


def lines_after(child: subprocess.Popen, moment: list[float]) -> list[str]:
    """The output lines `child` writes after the time in `moment` (set by the caller while it runs)."""
    late = []
    for line in child.stdout:
        if moment and time.time() >= moment[0] and line.strip():
            late.append(line.rstrip())
    return late


def double_ctrl_c(tmp: Path, reference: Path, tries: int) -> None:
    out, rng, worst, codes = tmp / "double-ctrl-c", random.Random(7), [], []
    for _ in range(tries):
        child, moment = started("run", SPEC, "--out", out, "--quiet"), []
        reader = futures.ThreadPoolExecutor(1)
        late = reader.submit(lines_after, child, moment)
        time.sleep(rng.uniform(0.5, 6.0))
        moment.append(time.time())
        child.send_signal(signal.SIGINT)
        time.sleep(0.3)
        if child.poll() is None:
            child.send_signal(signal.SIGINT)
        child.wait(timeout=120)
        printed = late.result(timeout=30)
        reader.shutdown()
        codes.append(child.returncode)
        worst = max(worst, printed, key=len)
    final = jaxmem("run", SPEC, "--out", out, "--quiet")
    same, words = agrees(out, reference)
    tracebacks = any("Traceback" in line for line in worst)
    record(
        f"double Ctrl-C (SIGINT, again 0.3 s later) × {tries} at random times, then rerun",
        "exit 130 (0 if it had finished), at most 3 lines, no traceback; rerun agrees",
        all(code in (0, 130) for code in codes) and len(worst) <= 3 and not tracebacks and same,
        f"exits {sorted(set(codes))}; most lines after the first signal: {len(worst)} "
        f"({' / '.join(worst)[:160]}); rerun exit {final.returncode}; {words}",
    )


def odd_lock_files(tmp: Path, reference: Path) -> None:
    kinds = {
        "a FIFO": lambda lock: os.mkfifo(lock),
        "a directory": lambda lock: lock.mkdir(),
        "a dangling symlink": lambda lock: lock.symlink_to(lock.parent / "nowhere"),
    }
    for kind, make in kinds.items():
        out = tmp / f"odd-lock-{len(ROWS)}"
        shutil.copytree(reference, out)
        (out / ".lock").unlink(missing_ok=True)
        make(out / ".lock")
        outcomes = []
        for command in (["status", out], ["run", SPEC, "--out", out, "--quiet"]):
            start = time.time()
            try:
                result = jaxmem(*command, timeout=30)
                outcomes.append((result.returncode, time.time() - start, said(result)))
            except subprocess.TimeoutExpired:
                outcomes.append((None, time.time() - start, "blocked"))
        record(
            f"{kind} as .lock (status, then run)",
            "a clear message within 5 s each, no traceback",
            all(code is not None and took < 5 and "Traceback" not in text for code, took, text in outcomes),
            "; ".join(
                f"{c[0]} exit {code} in {took:.1f} s: {text}"
                for c, (code, took, text) in zip(("status", "run"), outcomes)
            ),
        )


def peer_death(tmp: Path) -> None:
    """kill -9 of either process of a two-process job on localhost, once process 1's shard holds a checkpoint."""
    spec, reference = ROOT / "tests" / "specs" / "tiny_mlp.toml", tmp / "peer-reference"
    jaxmem("run", spec, "--out", reference, "--quiet")
    ports = random.Random(8).sample(range(29000, 29999), 2)
    for victim, port in zip((1, 0), ports):
        out, survivor = tmp / f"peer-{victim}", 1 - victim
        job = [
            started(
                "run",
                spec,
                "--out",
                out,
                "--quiet",
                "--coordinator",
                f"127.0.0.1:{port}",
                "--num-processes",
                2,
                "--process-id",
                k,
            )
            for k in (0, 1)
        ]
        wait_until(lambda: any((out / "shards" / "p1" / "checkpoints").glob("*/*")), timeout=180)
        job[victim].send_signal(signal.SIGKILL)
        killed = time.time()
        output, _ = job[survivor].communicate(timeout=300)
        took = time.time() - killed
        status = jaxmem("status", out)
        counted = next((line for line in status.stdout.splitlines() if "runs done" in line), "")
        resumed = jaxmem("run", spec, "--out", out, "--quiet")
        same, words = agrees(out, reference)
        lines = [line for line in output.splitlines() if line.strip() and not line.startswith("[jaxmem]")]
        record(
            f"kill -9 of process {victim} of 2 on localhost",
            "the other exits within 60 s, one line naming "
            "it and the resume command, no C++ trace; status counts the shards' runs; resume agrees",
            job[survivor].returncode == 5
            and took < 60
            and "Check failure" not in output
            and f"process {victim}" in output
            and "resume with" in output
            and not counted.startswith("0 runs")
            and same,
            f"process {survivor} exit {job[survivor].returncode} after {took:.1f} s: {' / '.join(lines)[:200]}; "
            f"status: {counted}; resume exit {resumed.returncode}; {words}",
        )


def copy_with(reference: Path, out: Path, *statements: str) -> Path:
    """A copy of the reference folder with SQL statements run on its store behind jaxmem's back."""
    shutil.copytree(reference, out)
    with sqlite3.connect(out / "results.sqlite") as db:
        for statement in statements:
            db.execute(statement)
    return out


def silent_damage(tmp: Path, reference: Path) -> None:
    """Damage that status and report refused but other commands passed over."""
    damaged = copy_with(
        reference,
        tmp / "traj-flip",
        "drop trigger if exists trajectories_checksum",
        "update trajectories set metrics = '{\"accuracy\": 1.0}' where rowid = 1",
    )
    result = jaxmem("compare", reference, damaged)
    record(
        "a trajectories row changed behind jaxmem's back, then compare",
        "exit 4 naming the table",
        result.returncode == 4 and "trajectories" in said(result),
        f"exit {result.returncode}: {said(result)}",
    )
    lost = copy_with(reference, tmp / "meta-lost", "delete from meta where key = 'preset'")
    loaded = subprocess.run(
        [sys.executable, "-c", f"import jaxmem; print(len(jaxmem.load_results({str(lost)!r})))"],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    last = (loaded.stderr.strip().splitlines() or [""])[-1]
    record(
        "a meta row deleted, then load_results",
        "refused as status refuses it (lost rows)",
        loaded.returncode != 0 and "lost rows" in last,
        f"exit {loaded.returncode}: {last[:200]}",
    )
    dropped = copy_with(reference, tmp / "traj-dropped", "drop table trajectories")
    status, rerun = jaxmem("status", dropped), jaxmem("run", SPEC, "--out", dropped, "--quiet")
    record(
        "the trajectories table dropped",
        "status and run agree: exit 4, lost rows named",
        status.returncode == rerun.returncode == 4 and "lost rows" in said(status) + said(rerun),
        f"status exit {status.returncode}: {said(status)}; run exit {rerun.returncode}",
    )


def relative_out(tmp: Path) -> None:
    """A run with a relative --out stopped, then status asked from another folder."""
    folder = tmp / "relative"
    folder.mkdir()
    child = started("run", SPEC, "--out", "out", "--quiet", cwd=folder)
    wait_until(lambda: stored_runs(folder / "out") >= 4, child)
    child.send_signal(signal.SIGTERM)
    child.communicate(timeout=120)
    status = jaxmem("status", folder / "out")
    advice = next((line for line in status.stdout.splitlines() if "resume with" in line), "")
    record(
        "status of a run stopped with a relative --out, asked from another folder",
        "the resume command names the folder by a path that works from here",
        f"--out {folder / 'out'}" in advice,
        advice[-160:] or f"exit {status.returncode}: {said(status)}",
    )


def stopped_compile(tmp: Path) -> None:
    """SIGSTOP for 10 s while a bucket compiles: the stop is no compile time (against an undisturbed run's,
    both without the compile cache)."""
    out, undisturbed = tmp / "sigstop", tmp / "sigstop-undisturbed"
    jaxmem("run", SPEC, "--out", undisturbed, "--quiet", "--no-compile-cache")
    child = started("run", SPEC, "--out", out, "--quiet", "--no-compile-cache")
    seen, deadline = "", time.time() + 120
    while "compiling bucket" not in seen and time.time() < deadline and child.poll() is None:
        seen = child.stdout.readline()
    child.send_signal(signal.SIGSTOP)
    time.sleep(10)
    child.send_signal(signal.SIGCONT)
    child.communicate(timeout=300)
    seconds = [compiled_seconds(folder) for folder in (out, undisturbed)]
    record(
        "SIGSTOP for 10 s during a compile",
        "the stop is not counted as compile time",
        seconds[0] < seconds[1] + 5,
        f"compile time {seconds[0]:.1f} s (the undisturbed run's: {seconds[1]:.1f} s)",
    )


def compiled_seconds(out: Path) -> float:
    with sqlite3.connect(f"file:{out / 'results.sqlite'}?mode=ro", uri=True) as db:
        return db.execute("select coalesce(sum(seconds), 0) from compiles").fetchone()[0]


def dry_run_memory(tmp: Path) -> None:
    result = jaxmem(
        "run",
        ROOT / "tests" / "specs" / "tiny_linear.toml",
        "--dry-run",
        "--memory-cap",
        "1MiB",
        "--set",
        "fixed.d=512",
        "--set",
        "fixed.N=512",
        "--out",
        tmp / "dry",
    )
    peak = next((line for line in result.stdout.splitlines() if "peak memory" in line), "")
    record(
        "a dry-run whose buckets exceed a 1 MiB memory cap",
        "the peak memory line says so (never 0.0 MiB)",
        result.returncode == 0 and "0.0 MiB" not in peak and "over the budget" in peak,
        peak.strip()[:200],
    )


def disk_full_before_the_first_write(tmp: Path) -> None:
    mount = tmp / "full"
    if not mounted_tmpfs(mount, "64k"):
        record("a disk full before the first write", "exit 4 naming the folder", True, "not run: no tmpfs mounts")
        return
    try:
        subprocess.run(["dd", "if=/dev/zero", f"of={mount / 'filler'}", "bs=4k"], capture_output=True)
        result = jaxmem("run", SPEC, "--out", mount / "out", "--quiet")
        record(
            "a disk full before the first write",
            "exit 4 'no space left on <folder>'",
            result.returncode == 4 and f"no space left on {mount}" in said(result),
            f"exit {result.returncode}: {said(result)}",
        )
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)


def lock_deleted_while_stopped(tmp: Path, reference: Path) -> None:
    """A run SIGSTOPped, its .lock deleted by hand, a second run started, then the first continued."""
    out = tmp / "lock-deleted"
    first = started("run", SPEC, "--out", out, "--quiet")
    wait_until(lambda: stored_runs(out) >= 4, first)
    first.send_signal(signal.SIGSTOP)
    (out / ".lock").unlink()
    second = jaxmem("run", SPEC, "--out", out, "--quiet", timeout=120)
    first.send_signal(signal.SIGCONT)
    output, _ = first.communicate(timeout=300)
    rerun = jaxmem("run", SPEC, "--out", out, "--quiet")
    same, words = agrees(out, reference)
    record(
        "a run SIGSTOPped, its .lock deleted, a second run started, the first continued",
        "the second exits 3; the first stops (exit 3) or finishes; a rerun agrees",
        second.returncode == 3 and first.returncode in (0, 3) and rerun.returncode == 0 and same,
        f"second exit {second.returncode}: {said(second)}; first exit {first.returncode}; rerun exit "
        f"{rerun.returncode}; {words}",
    )


def report_racing_the_end(tmp: Path) -> None:
    """`jaxmem report` rerun for as long as the sweep runs, the last one still running as it finishes."""
    out = tmp / "report-race"
    child, reports = started("run", SPEC, "--out", out, "--quiet"), 0
    while child.poll() is None:
        if (out / "results.sqlite").exists():
            jaxmem("report", out)
            reports += 1
        time.sleep(0.2)
    child.communicate(timeout=60)
    status = jaxmem("status", out)
    text = (out / "report.md").read_text() if (out / "report.md").exists() else ""
    stale = "partial:" in text
    record(
        f"`jaxmem report` racing the sweep's end ({reports} reports while it ran)",
        "status finished; report.md is not partial",
        "finished" in status.stdout and not stale,
        f"status: {status.stdout.splitlines()[0][-40:] if status.stdout else said(status)}; partial report: {stale}",
    )


BROKEN = {
    "raise in init": "def init(key, shape, dyn):\n    raise RuntimeError('boom')\n",
    "a vector loss": "def loss(params, problem, shape, dyn, key):\n    return params['w']\n",
    "a missing metric": "def evaluate(params, problem, shape, dyn):\n    return {}\n",
    "a syntax error": "def init(key, shape dyn):\n    pass\n",
}
EXPERIMENT = """
import jax.numpy as jnp
from jaxmem.experiments.interface import Costs, Experiment, static
def init(key, shape, dyn):
    return {"w": jnp.ones(shape["d"])}, {}
def loss(params, problem, shape, dyn, key):
    return jnp.sum(params["w"] ** 2)
def evaluate(params, problem, shape, dyn):
    return {"loss": jnp.sum(params["w"] ** 2)}
"""
FOOTER = """
EXPERIMENT = Experiment(name="broken", doc="", fields={"d": static(int, "size", 2)}, init=init, loss=loss,
                        evaluate=evaluate, metrics=("loss",), costs=Costs(flops_per_step=lambda c: 1.0))
"""


def broken_experiments(tmp: Path) -> None:
    for attack, change in BROKEN.items():
        folder = tmp / f"broken-{len(ROWS)}"
        folder.mkdir()
        (folder / "broken_exp.py").write_text(EXPERIMENT + "\n" + change + FOOTER)
        (folder / "broken.toml").write_text(
            'experiment = "broken_exp:EXPERIMENT"\nseeds = [0]\n[train]\nsteps = 4\neval_every = 2\n'
            'metric = "loss"\nlearning_rates = [0.1]\n'
        )
        result = jaxmem("run", folder / "broken.toml", "--out", folder / "out", "--quiet", cwd=folder)
        ok = result.returncode == 2 and "broken_exp" in said(result)
        record(
            f"a user experiment with {attack}",
            "exit 2, first line names the user's module",
            ok,
            f"exit {result.returncode}: {said(result)}",
        )


def hung_program(tmp: Path) -> None:
    folder = tmp / "hung"
    folder.mkdir()
    (folder / "hung_exp.py").write_text(
        textwrap.dedent("""
        import time, jax, jax.numpy as jnp
        from jaxmem.experiments.interface import Costs, Experiment, static
        def blocked(x):
            time.sleep(3600)
            return x
        def init(key, shape, dyn):
            return {"w": jnp.ones(shape["d"])}, {}
        def loss(params, problem, shape, dyn, key):
            return jnp.sum(params["w"] ** 2)
        def evaluate(params, problem, shape, dyn):
            value = jax.pure_callback(blocked, jax.ShapeDtypeStruct((), jnp.float32), jnp.sum(params["w"]))
            return {"loss": value}
        EXPERIMENT = Experiment(name="hung", doc="", fields={"d": static(int, "size", 2)}, init=init, loss=loss,
                                evaluate=evaluate, metrics=("loss",), costs=Costs(flops_per_step=lambda c: 1.0))
    """)
    )
    (folder / "hung.toml").write_text(
        'experiment = "hung_exp:EXPERIMENT"\nseeds = [0]\n[train]\nsteps = 4\neval_every = 2\nmetric = "loss"\n'
        "learning_rates = [0.1]\n"
    )
    child = started("run", folder / "hung.toml", "--out", folder / "out", "--quiet", cwd=folder)
    seen, deadline = "", time.time() + 120
    while "has not returned" not in seen and time.time() < deadline and child.poll() is None:
        seen += child.stdout.readline()
    sent = time.time()
    child.send_signal(signal.SIGTERM)
    output, _ = child.communicate(timeout=120)
    took = time.time() - sent
    record(
        "a program that never returns, then SIGTERM",
        "reported as not returning; exit 143 within ~10 s",
        "has not returned" in seen and child.returncode == 143 and took < 20,
        f"reported: {'has not returned' in seen}; exit {child.returncode} after {took:.1f} s",
    )


def hang_preset(tmp: Path) -> None:
    start = time.time()
    result = jaxmem(
        "run",
        ROOT / "sweeps/chen_li24/e1_phase1_bias.toml",
        "--preset",
        "quick",
        "--set",
        "grid.d=[64]",
        "--set",
        "grid.k=[4]",
        "--set",
        "seeds=[0]",
        "--out",
        tmp / "e1",
        "--quiet",
        timeout=600,
    )
    record(
        "the e1_phase1_bias quick preset at d = 64 (hung before)",
        "finishes",
        result.returncode == 0,
        f"exit {result.returncode} in {time.time() - start:.0f} s",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--out", default=str(HERE / "RESULTS_attacks.md"))
    args = parser.parse_args()
    started_at = time.time()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        reference = tmp / "reference"
        assert jaxmem("run", SPEC, "--out", reference, "--quiet").returncode == 0
        kill_nine(tmp, reference, args.kills)
        stop_with(tmp, reference, signal.SIGTERM, 143)
        stop_with(tmp, reference, signal.SIGINT, 130)
        double_ctrl_c(tmp, reference, args.kills)
        concurrent(tmp)
        damaged_store(tmp, reference)
        damaged_checkpoints(tmp, reference)
        full_disk(tmp, reference)
        disk_full_before_the_first_write(tmp)
        silent_damage(tmp, reference)
        relative_out(tmp)
        stopped_compile(tmp)
        dry_run_memory(tmp)
        peer_death(tmp)
        read_only(tmp, reference)
        bad_input(tmp)
        odd_lock_files(tmp, reference)
        lock_deleted_while_stopped(tmp, reference)
        report_racing_the_end(tmp)
        broken_experiments(tmp)
        edited_experiment(tmp)
        hung_program(tmp)
        hang_preset(tmp)
    failed = sum(row[-1] != "PASS" for row in ROWS)
    lines = [
        "# The attack list, rerun",
        "",
        f"`python benchmarks/attacks.py --kills {args.kills}` on {time.strftime('%Y-%m-%d %H:%M %Z')}, "
        f"{time.time() - started_at:.0f} s; {len(ROWS) - failed} of {len(ROWS)} attacks end as they must. Each "
        "attack runs the real `jaxmem` command in its own process on tests/specs/tiny_kill.toml; 'agrees' means "
        "`jaxmem compare` against one uninterrupted run finds no difference.",
        "",
        "| attack | must end in | outcome | |",
        "| --- | --- | --- | --- |",
        *(f"| {' | '.join(row)} |" for row in ROWS),
    ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
