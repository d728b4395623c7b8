"""`jaxmem report DIR`: tables, plot and report.md from whatever the store holds (also mid-sweep)."""

from __future__ import annotations

import json
from pathlib import Path

from jaxmem.report import write_report
from jaxmem.store import load_results


def report(out_dir: str | Path) -> Path:
    """Write runs.csv, capacity.csv, capacity.png and report.md into `out_dir`; return report.md's path."""
    out_dir = Path(out_dir)
    meta = load_results(out_dir, "meta").set_index("key")["value"].to_dict()
    spec = json.loads(meta.get("resolved_spec", "{}"))
    runs = load_results(out_dir, "runs")
    runs.to_csv(out_dir / "runs.csv", index=False)
    searches = load_results(out_dir, "searches")
    compiles = load_results(out_dir, "compiles")
    meta_view = {k: meta[k] for k in ("spec", "preset", "experiment", "device", "jaxmem_version") if k in meta}
    meta_view["wall_time_s"] = float(meta.get("elapsed_s", 0.0))
    meta_view["compiles"] = len(compiles)
    meta_view["compile_time_s"] = round(float(compiles["seconds"].sum()), 2) if len(compiles) else 0.0
    paths = write_report(out_dir, spec.get("report", {}), searches, runs, meta_view)
    return next(p for p in paths if p.name == "report.md")
