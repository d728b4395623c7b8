"""`jaxmem list --columns` (jaxmem.report.columns) documents every CSV a report writes: each file name the report
package writes, and the files and columns of a small report regenerated from a shipped export (no training)."""

import ast
import re
from pathlib import Path

import pandas as pd

from jaxmem.persistence.shipped import import_results
from jaxmem.report.columns import tables
from jaxmem.report.from_store import report

ROOT = Path(__file__).resolve().parents[1]
CSV = re.compile(r"[a-z_]+\.csv")


def written_names() -> set[str]:
    """Every CSV file name jaxmem/report writes: its "name.csv" constants and write_table(frame, folder, "name")."""
    names = set()
    for path in (ROOT / "jaxmem" / "report").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and CSV.fullmatch(node.value):
                names.add(node.value)
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "write_table" and len(node.args) == 3:
                names.add(f"{node.args[2].value}.csv")
    return names


def documented(table: str) -> set[str]:
    """The column names a table's entry lists ("a, b" and "x / y" keys split)."""
    return {name for key in tables()[table] for name in re.split(r", | / ", key)}


def test_every_csv_the_report_writes_is_documented():
    names = written_names()
    assert {"relations.csv", "relation_fits.csv", "agreement.csv", "final_eval.csv", "runs.csv"} <= names
    assert names - set(tables()) == set()


def test_a_regenerated_report_writes_only_documented_files_and_columns(tmp_path):
    folder = tmp_path / "full_vs_reduced"
    import_results(ROOT / "sweeps" / "deora24" / "data" / "full_vs_reduced-quick", folder)
    report(folder)
    written = {p.name for p in folder.glob("*.csv")}
    assert "agreement.csv" in written and written - set(tables()) == set()
    columns = set(pd.read_csv(folder / "agreement.csv").columns) - {"reduced"}  # (the compared field)
    assert columns <= documented("agreement.csv")


def test_n_seeds_says_it_counts_answered_searches():
    assert tables()["capacity.csv"]["n_seeds"].startswith("answered searches, not seeds")
