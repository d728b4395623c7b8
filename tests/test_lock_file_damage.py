"""A `.lock` that is no lease (random bytes, a directory): taken over, or refused with one line, never a
traceback or a folder left unusable (reliability issue, item 6)."""

import fcntl
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from jaxmem.cli.main import main
from jaxmem.persistence.lock import LockError, OutputLock, lock_state, read_lease
from jaxmem.persistence.store import FILENAME, Store

GARBAGE = bytes(range(256)) * 2  # not UTF-8, not JSON
TINY = 'experiment = "assoc_memory"\n[fixed]\nmodel = "linear"\nd = 4\nN = 4\n[train]\nsteps = 2\neval_every = 1\n'


def damaged_lock(out):
    out.mkdir(parents=True, exist_ok=True)
    (out / ".lock").write_bytes(GARBAGE)
    return out


def test_a_lock_file_of_random_bytes_is_taken_over_with_a_warning(tmp_path, caplog):
    out = damaged_lock(tmp_path / "out")
    assert lock_state(out).startswith("stale lease: the lock file holds no readable lease")
    with caplog.at_level(logging.WARNING, logger="jaxmem"), OutputLock(out):
        mine = read_lease(out / ".lock")
        assert (mine.host, mine.pid) == (socket.gethostname(), os.getpid())
    (warning,) = [r.getMessage() for r in caplog.records if "damaged lock file" in r.getMessage()]
    assert str(out / ".lock") in warning
    assert not (out / ".lock").read_text().strip() and lock_state(out) == "idle"  # usable again


def test_a_damaged_lock_file_whose_flock_is_held_is_refused(tmp_path):
    """The damage may hide a live run of this host: its flock still tells."""
    out = damaged_lock(tmp_path / "out")
    holder = os.open(out / ".lock", os.O_RDONLY)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert lock_state(out) == "running: owner unknown"
        with pytest.raises(LockError, match="in use by another jaxmem run \\(owner unknown\\)"):
            with OutputLock(out):
                pass
    finally:
        os.close(holder)
    assert (out / ".lock").read_bytes() == GARBAGE  # untouched


def test_status_names_a_damaged_lock_file_as_a_stale_lease(tmp_path, capsys):
    out = damaged_lock(tmp_path / "out")
    Store(out).close()
    assert main(["status", str(out)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    stale = "stale lease: the lock file holds no readable lease; the next run takes it over"
    assert first.endswith(f": not started ({stale})")


ODD_FILES = {  # what stands in the lock file's place: how to make it, how it is named, how to remove it
    "directory": (Path.mkdir, "a directory", "rm -r"),
    "fifo": (os.mkfifo, "a named pipe (FIFO)", "rm"),
    "dangling symlink": (lambda lock: lock.symlink_to(lock.parent / "nowhere"), "a symbolic link to {nowhere}", "rm"),
}


def answered(call, seconds: float = 20.0):
    """`call()`'s result, from a thread given `seconds` to answer (a FIFO opened for reading blocks forever;
    a first run in this process imports JAX)."""
    result = []
    threading.Thread(target=lambda: result.append(call()), daemon=True).start()
    deadline = time.time() + seconds
    while not result and time.time() < deadline:
        time.sleep(0.01)
    assert result, f"no answer within {seconds} s"
    return result[0]


@pytest.mark.parametrize("odd", ODD_FILES)
def test_no_regular_file_in_place_of_the_lock_file_refuses_a_run_naming_it(tmp_path, capsys, odd):
    """Issue 36: a FIFO made run and status block forever, a dangling link gave a bare '[Errno 2]'."""
    out, spec = tmp_path / "out", tmp_path / "tiny.toml"
    make, kind, remove = ODD_FILES[odd]
    out.mkdir()
    Store(out).close()
    lock = out / ".lock"
    make(lock)
    spec.write_text(TINY)
    assert answered(lambda: main(["run", str(spec), "--out", str(out), "--quiet"])) == 3
    kind = kind.format(nowhere=out / "nowhere (missing)")
    fix = f"remove it (e.g. `{remove} {lock}`) and rerun"
    assert capsys.readouterr().err == f"jaxmem: error: {lock} is {kind}, not jaxmem's lock file; {fix}\n"
    assert answered(lambda: main(["status", str(out)])) == 0  # status still answers, with a warning
    assert capsys.readouterr().out.splitlines()[-1] == f"warning: {lock} is {kind}, not jaxmem's lock file; {fix}"
    assert os.path.lexists(lock) and (out / FILENAME).is_file()  # nothing removed


def test_an_unusable_lock_file_is_refused_before_the_engine_loads(tmp_path):
    """The run's refusal of a FIFO as its lock file comes before JAX's and the driver's imports (~1 s, not ~4)."""
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / ".lock")
    check = (
        "import sys; from jaxmem.cli.main import main; "
        f"code = main(['run', 'no_such_sweep', '--out', {str(out)!r}]); "
        "print(code, 'jaxmem.driver.sweep' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=120)
    assert result.stdout.split() == ["3", "False"] and "named pipe (FIFO)" in result.stderr


def test_the_early_lock_file_check_leaves_a_bad_out_to_its_own_message(tmp_path, capsys):
    """--out naming a file (no folder there to hold a lock file): exit 2 from --out's check, no traceback."""
    spec = tmp_path / "tiny.toml"
    spec.write_text(TINY)
    assert main(["run", str(spec), "--out", str(spec), "--quiet"]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
