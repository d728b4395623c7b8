"""Every number the sweep READMEs quote, and docs/gallery.md, regenerated from the stores of the sweeps' runs.

    python sweeps/readme_numbers.py [--run] [--ship] [--check] [--family F] [--sweeps a,b] [--presets p,q]
                                    [--results DIR]

A README (sweeps/<family>/README*.md) or docs/gallery.md holds generated blocks:

    <!-- numbers: <sweep> <preset> <kind> [options] -->
    ... written by this script ...
    <!-- /numbers -->

A block is rendered from the store of `jaxmem run sweeps/<family>/<sweep>.toml --preset <preset>` in
DIR/<sweep>-<preset> (DIR: results/numbers) or, where that folder holds no store (a fresh clone), from the
preset's shipped results, sweeps/<family>/data/<sweep>-<preset>/ (`jaxmem export`: Parquet files and a manifest,
imported into a scratch store; see sweeps/README.md). The store's report is written again first (`jaxmem
report`: the current report code, with the sweep spec's `[report]` table as it is now), then read through
jaxmem.report.headline: report.md's sections, verdicts.json and the report's CSVs. Every block starts with the
preset and seeds it comes from and the command that regenerates it; a block with neither a store nor shipped
results says so, with that command.

  --run       run (or resume) the preset of every selected block first, one at a time (`jaxmem run`: a
              finished store is left as it is)
  --ship      then export every selected preset's store in DIR to its shipped folder (sweeps/<family>/data/)
  --check     write nothing; compare every block, within the tolerance below, and every gallery figure,
              re-rendered, with docs/gallery/ (FIGURE_TOLERANCE); print what differs. Exit 0: all agree;
              1: a block or figure differs; 3: all that could be rendered agree, but some blocks of a shipped
              preset (quick) have neither a store nor shipped results (listed, with the command that ships
              them). A block of another preset (paper, testable, ...) without a store reads "Not run here"
              with its command, and is compared as such: those presets run on demand
  --family F  only the READMEs of sweeps/F/ and the gallery entries of F's sweeps
  --sweeps    only the blocks of these sweeps (comma-separated)
  --presets   only the blocks of these presets (comma-separated, e.g. quick)
  --reuse-reports
              read each store's report as it was last written (faster: a report with host reference
              checks re-solves them); the default writes it again with the current report code

Kinds (options key=value; lists comma-separated; quote a value with spaces):
  capacity            per grid point the answer's median, 25–75 %, answered searches and ratios (capacity.csv)
  verdicts [section=S]
                      every verdict report.md states, with its reason (sections starting with S)
  section "HEADING" [all_columns=true]
                      a report.md section quoted: its bullet lines and tables (table columns constant over two
                      or more rows left out, unless all_columns=true: a measured value that happens to repeat)
  csv NAME [columns=a,b] [where=f=v]
                      a report CSV (relation_fits, final_eval_readoff, rates, references, ...) as a table; a
                      per-run CSV gets the runs' config fields
  final metrics=a,b [by=x,y] [where=f=v] [table=final_eval] [stat=median|mean]
                      per grid point each final metric's median (min–max) over seeds (runs.csv; table=final_eval:
                      per test-time point, final_eval.csv, whose untrained_<metric> are the same runs untrained);
                      stat=mean: the mean over the runs and their count (of a 0/1 metric: the fraction that is 1)
  steps metric=a,b steps=1,10 [by=x] [stat=mean|median] [multiply=step] [where=f=v]
                      recorded metrics at the logged steps nearest to the given ones (trajectories.csv)
  order metric=m by=x [direction=increasing|decreasing] [stat=mean|median] [from=k] [where=f=v]
                      at how many logged steps the metric's mean (median) over seeds is monotone in x
  ahead metric=m by=f lower=a upper=b [per=x] [stat=mean|median] [where=f=v]
                      at how many logged steps the metric is lower for f = a than for f = b
  fit metric=m x=f [range=lo,hi] [abs=true] [expect=lo,hi] [where=f=v]
                      the log-log slope of a final metric's per-x medians, its 95 % interval, per-seed slopes
  theory x=X quantity=Q [column=C]
                      li_thesis R4.10: a chapter-4 bound per X beside the measured value
                      (sweeps/li_thesis/analyze.py's overlay)
  gallery [plot=FILE] the report's figure (its first of FIGURES; copied to docs/gallery/<sweep>.png, or
                      <sweep>-<preset>.png for another preset than quick) and its verdicts
  targets             a table of a paper's targets, one row per further line of the marker (`<!-- numbers: - -
                      targets`, then `target | claim | sweep preset [section ...] | size | why [| judgement]`):
                      the size run (the store's preset and seeds) and the verdict (the report's verdicts in the
                      sections or claims naming the target, or in sections starting with the given section
                      prefixes, from verdicts.json; a judgement the row states is shown after them as "judged by
                      hand", and a row without an automatic verdict says so in bold), from each row's store; a row
                      whose third cell is
                      a test's path (tests/...) reads no store: its verdict is the judgement the test checks;
                      one whose third cell is `not built` reads none either: "not run here (not built)"
  counts              (`<!-- numbers: - - counts -->`, docs/gallery.md) per paper (`## ` heading) its entries,
                      those not run here and how many verdicts of each outcome the file's generated blocks state
  shipped             (`<!-- numbers: - - shipped -->`, sweeps/README.md) every shipped export (sweeps/*/data/):
                      family, sweep, preset, sweep time, size, runs and trajectory rows, from its manifest
`where` may be given more than once (every condition must hold); its value may list alternatives, where=H=1|4.

Tolerance (--check): a block agrees with its rendering when the text between their numbers is the same and each
number agrees: equal, or within RELATIVE (1e-3) of each other, or within ABSOLUTE (1e-6: round-off, as in residuals),
or, printed with 3 or more significant digits, within one unit of its last printed digit (0.001318 and 0.001317;
-1337 and -1338; 0.125 and 0.126); so float noise from a rerun passes while a changed count (3 of 5), verdict or
digit beyond these does not.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from jaxmem.persistence.shipped import MANIFEST, ExportError, export_results, import_results
from jaxmem.report.files import FIGURES

ROOT = Path(__file__).resolve().parent.parent
SWEEPS = ROOT / "sweeps"
GALLERY = ROOT / "docs" / "gallery.md"
BLOCK = re.compile(r"(<!-- numbers: (?P<what>.*?)\s-->\n)(?P<body>.*?)(<!-- /numbers -->)", re.S)
DASH = "–"
GALLERY_WIDTH = 1400  # pixels: the gallery's figures stay small (docs/gallery/ is committed)


class BlockError(ValueError):
    """A block this script cannot render (an unknown kind or option, a section the report lacks)."""


@dataclasses.dataclass(frozen=True)
class Block:
    """One generated block: the file it is in, its sweep, preset, kind and options (key, value) pairs."""

    path: Path
    sweep: str
    preset: str
    kind: str
    args: tuple[str, ...]
    options: tuple[tuple[str, str], ...]
    rows: tuple[str, ...] = ()  # the marker's further lines (a targets table's rows)

    def option(self, key: str, default: str | None = None) -> str | None:
        found = [v for k, v in self.options if k == key]
        if len(found) > 1:
            raise BlockError(f"{self}: {key} given {len(found)} times")
        return found[0] if found else default

    def where(self) -> list[tuple[str, str]]:
        return [tuple(v.split("=", 1)) for k, v in self.options if k == "where"]

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}: {self.sweep} {self.preset} {self.kind}"


OPTION = re.compile(r"[A-Za-z_]\w*=")  # key=value; a quoted heading such as "Fits (b = 0)" is an argument


def parse_block(path: Path, what: str) -> Block:
    """The Block of a `<!-- numbers: what -->` marker (its lines after the first are its rows)."""
    head, *rows = what.split("\n")
    words = shlex.split(head)
    if len(words) < 3:
        raise BlockError(f"{path}: '<!-- numbers: {what} -->' needs a sweep, a preset and a kind")
    sweep, preset, kind, *rest = words
    args = tuple(w for w in rest if not OPTION.match(w))
    options = tuple(tuple(w.split("=", 1)) for w in rest if OPTION.match(w))
    return Block(path, sweep, preset, kind, args, options, tuple(r.strip() for r in rows if r.strip()))


def blocks_of(path: Path) -> list[Block]:
    return [parse_block(path, m.group("what")) for m in BLOCK.finditer(path.read_text())]


def spec_path(sweep: str) -> Path:
    """sweeps/<family>/<sweep>.toml, the one shipped spec of that name."""
    found = sorted(SWEEPS.glob(f"*/{sweep}.toml"))
    if len(found) != 1:
        raise BlockError(f"sweep {sweep!r}: {len(found)} specs named {sweep}.toml under sweeps/")
    return found[0]


def family_of(sweep: str) -> str:
    return spec_path(sweep).parent.name


def regenerate_command(block: Block) -> str:
    return f"python sweeps/readme_numbers.py --run --sweeps {block.sweep} --presets {block.preset}"


def seeds_text(seeds: tuple[int, ...]) -> str:
    """e.g. "seeds 0–4", "seeds 0, 1, 11"."""
    if len(seeds) > 2 and list(seeds) == list(range(seeds[0], seeds[-1] + 1)):
        return f"seeds {seeds[0]}–{seeds[-1]}"
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(map(str, seeds))


def source_line(block: Block, headline) -> str:
    """The block's first line: preset, seeds, and the command that regenerates it."""
    partial = f" **{headline.partial}**" if headline.partial else ""
    return (
        f"*`{block.preset}` preset, {seeds_text(headline.seeds)}; regenerate: `{regenerate_command(block)}`*{partial}"
    )


def missing_text(block: Block) -> str:
    return (
        f"*Not run here: the `{block.preset}` preset of `{block.sweep}`; run it and regenerate with "
        f"`{regenerate_command(block)}`.*"
    )


# ---- formatting


def sig(value, digits: int = 3) -> str:
    """A number to `digits` significant digits (integers as they are); "–" for NaN."""
    if value is None or (isinstance(value, (float, np.floating)) and np.isnan(value)):
        return DASH
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, str):
        return value
    value = float(value)
    if value.is_integer() and abs(value) < 1e6:
        return str(int(value))
    return f"{value:.{digits}g}"


def spread_text(values: pd.Series, stat: str = "median") -> str:
    """ "median (min–max)" (or "mean (min–max)") of the finite values; a single value alone."""
    v = pd.to_numeric(values, errors="coerce").dropna().astype(float)  # a yes/no metric as 0/1
    if v.empty:
        return DASH
    if sig(v.min()) == sig(v.max()):  # one value, to the digits shown
        return sig(v.agg(stat))
    return f"{sig(v.agg(stat))} ({span(v.min(), v.max())})"


def span(lo: float, hi: float) -> str:
    """e.g. "0.2–0.5", "-1.3 to -0.9" (a dash would read as a minus)."""
    return f"{sig(lo)}{' to ' if lo < 0 else '–'}{sig(hi)}"


def table(headers: list[str], rows: list[list]) -> str:
    """A markdown table of the report's kind (jaxmem.report.text), numbers to 3 significant digits."""
    from jaxmem.report.text import markdown_table

    return markdown_table(headers, rows, sig)


def matches(column: pd.Series, value: str) -> pd.Series:
    """Rows whose cell equals `value` (or one of "a|b|c"), numerically where both are numbers."""
    numbers = pd.to_numeric(column, errors="coerce")
    found = pd.Series(False, index=column.index)
    for one in value.split("|"):
        try:
            found |= numbers == float(one)
        except ValueError:
            found |= column.astype(str) == one
    return found


def selected(frame: pd.DataFrame, block: Block) -> pd.DataFrame:
    for field, value in block.where():
        if field not in frame:
            raise BlockError(f"{block}: where {field}: no such column")
        frame = frame[matches(frame[field], value)]
    return frame


def listed(block: Block, key: str, default: str | None = None) -> list[str]:
    value = block.option(key, default)
    if value is None:
        raise BlockError(f"{block}: needs {key}=")
    return [v for v in value.split(",") if v]


def required(frame: pd.DataFrame | None, name: str, block: Block) -> pd.DataFrame:
    if frame is None:
        raise BlockError(f"{block}: the report wrote no {name}.csv")
    return frame


def varying(frame: pd.DataFrame, columns: list[str]) -> list[str]:
    return [c for c in columns if frame[c].astype(str).nunique() > 1]


# ---- kinds


def capacity_kind(block: Block, headline) -> str:
    """Per grid point: the varying config fields, the answer's median and quartiles (≥/≤ where censored),
    answered searches and each ratio's median (min–max)."""
    from jaxmem.report.capacity.markdown import answered_text, bounded, censored_text

    points = required(headline.table("capacity"), "capacity", block)
    config = list(points.columns[1 : list(points.columns).index("params")])
    keys = varying(points, config)
    ratios = [c.removesuffix(" median") for c in points.columns if c.endswith(" median")]
    variable = headline.variable or "answer"
    headers = keys + [f"{variable} median", "25–75 %", "answered", "censored"]
    headers += [f"{r} median (min–max)" for r in ratios]
    rows = []
    for r in points.to_dict("records"):
        cells = [r[k] for k in keys]
        cells += [
            bounded(r["capacity_median"], side(r["capacity_median_censored"])),
            f"{bounded(r['capacity_q25'], side(r['capacity_q25_censored']))} – "
            f"{bounded(r['capacity_q75'], side(r['capacity_q75_censored']))}",
            answered_text(r, None),
            censored_text(r),
        ]
        cells += [spread_of(r, ratio) for ratio in ratios]
        rows.append(cells)
    return table(headers, rows)


def side(censored) -> str:
    """A capacity.csv censoring cell: "above", "below", "both" or "" (empty in the CSV)."""
    return "" if pd.isna(censored) else str(censored)


def spread_of(row: dict, label: str) -> str:
    median, lo, hi = (row[f"{label} {s}"] for s in ("median", "min", "max"))
    if pd.isna(median):
        return DASH
    return sig(median) if sig(lo) == sig(hi) else f"{sig(median)} ({span(lo, hi)})"


def verdicts_kind(block: Block, headline) -> str:
    """Every verdict of report.md (of the sections starting with `section=`), with its section."""
    found = headline.verdicts
    prefix = block.option("section")
    if prefix:
        found = found[found["section"].str.startswith(prefix)]
    if found.empty:
        return "The report states no verdict" + (f" in {prefix}." if prefix else ".")
    return table(["report section", "check and verdict"], found[["section", "check"]].values.tolist())


def section_kind(block: Block, headline) -> str:
    """A report.md section's bullet lines and tables, quoted; table columns constant over 2+ rows dropped
    unless `all_columns=true`."""
    if len(block.args) != 1:
        raise BlockError(f'{block}: give one section heading, e.g. section "Fitted slope"')
    name = block.args[0]
    if name not in headline.sections:
        raise BlockError(f"{block}: report.md has no section {name!r} (it has: {', '.join(headline.sections)})")
    chunks: list[list[str]] = []  # runs of bullet lines and of table lines, in order
    for line in headline.sections[name].splitlines():
        kind = "|" if line.startswith("|") else "-" if line.startswith("- ") else None
        if kind is None:
            chunks.append([])
        elif chunks and chunks[-1] and chunks[-1][0][0] == kind:
            chunks[-1].append(line)
        else:
            chunks.append([line])
    keep_all = block.option("all_columns", "false") == "true"
    quoted = ["\n".join(c) if c[0][0] == "-" or keep_all else without_constant_columns(c) for c in chunks if c]
    return "\n\n".join(quoted)


def without_constant_columns(lines: list[str]) -> str:
    """A markdown table without the columns whose cells hold one value over two or more rows, verdicts
    (jaxmem.report.partial.VERDICT) kept."""
    from jaxmem.report.partial import VERDICT
    from jaxmem.report.text import row_cells

    cells = [row_cells(line) for line in lines]
    header, body = cells[0], [row for row in cells[1:] if not all(set(c) <= set("-: ") for c in row)]
    keep = [
        i
        for i in range(len(header))
        if len(body) < 2 or len({row[i] for row in body}) > 1 or VERDICT.search(body[0][i])
    ]
    rows = [[row[i] for i in keep] for row in [header, ["---"] * len(header), *body]]
    return "\n".join("| " + " | ".join(row) + " |" for row in rows)


def csv_kind(block: Block, headline) -> str:
    """A report CSV, its selected columns and rows."""
    if len(block.args) != 1:
        raise BlockError(f"{block}: give one CSV name, e.g. csv relation_fits")
    frame = required(headline.table(block.args[0]), block.args[0], block)
    runs = headline.table("runs")
    if "run_id" in frame and runs is not None:  # per-run tables get the runs' config fields
        fields = [f for f in headline.fields if f in runs and f not in frame]
        frame = frame.merge(runs[["run_id", *fields]], on="run_id", how="left")
    frame = selected(frame, block)
    columns = listed(block, "columns", ",".join(frame.columns))
    unknown = [c for c in columns if c not in frame]
    if unknown:
        raise BlockError(f"{block}: {block.args[0]}.csv has no column {', '.join(unknown)}")
    return table(columns, frame[columns].values.tolist())


def final_kind(block: Block, headline) -> str:
    """Per grid point (the `by` fields, else the varying config fields and lr): each final metric's median
    (min–max) over the seeds' runs (runs.csv; `table=final_eval`: per test-time point, final_eval.csv);
    `stat=mean`: the mean instead (of a 0/1 metric: the fraction of runs where it is 1)."""
    name, stat = block.option("table", "runs"), block.option("stat", "median")
    if name not in ("runs", "final_eval") or stat not in ("median", "mean"):
        raise BlockError(f"{block}: table is runs or final_eval, stat median or mean; got {name}, {stat}")
    runs = selected(required(headline.table(name), name, block), block)
    metrics = listed(block, "metrics")
    columns = [m if m in runs else f"final_{m}" for m in metrics]
    unknown = [m for m, c in zip(metrics, columns) if c not in runs]
    if unknown:
        raise BlockError(f"{block}: {name}.csv has no metric {', '.join(unknown)}")
    candidates = [c for c in (*headline.fields, "lr") if c in runs]
    by = listed(block, "by", ",".join(varying(runs, candidates)))
    rows = []
    for key, group in runs.groupby(by, sort=True) if by else [((), runs)]:
        key = key if isinstance(key, tuple) else (key,)
        counts = [group["seed"].nunique()] + ([len(group)] if stat == "mean" else [])
        rows.append([*key, *counts, *(spread_text(group[c], stat) for c in columns)])
    if stat == "median":
        return table([*by, "seeds", *metrics], rows)
    return table([*by, "seeds", "runs", *(f"{m} (mean)" for m in metrics)], rows)


def stat_of(block: Block):
    stat = block.option("stat", "mean")
    if stat not in ("mean", "median"):
        raise BlockError(f"{block}: stat is mean or median, got {stat}")
    return stat


def trajectories_of(block: Block, headline, metrics: list[str]) -> pd.DataFrame:
    frame = selected(required(headline.table("trajectories"), "trajectories", block), block)
    unknown = [m for m in metrics if m not in frame]
    if unknown:
        raise BlockError(f"{block}: trajectories.csv has no metric {', '.join(unknown)}")
    return frame


def nearest_steps(logged: np.ndarray, wanted: list[float]) -> list[int]:
    """The logged step nearest to each wanted one (in ln step; step 0 only for 0)."""
    positive = logged[logged > 0]
    return [int(0 if w == 0 else positive[np.argmin(np.abs(np.log(positive) - np.log(w)))]) for w in wanted]


def steps_kind(block: Block, headline) -> str:
    """Each metric's mean (median) over seeds at the logged steps nearest to `steps`, a row per `by` value
    and metric; `multiply=step` gives k times the metric (e.g. K·L̂(θ_K))."""
    metrics, stat = listed(block, "metric"), stat_of(block)
    frame = trajectories_of(block, headline, metrics)
    steps = nearest_steps(np.unique(frame["step"].to_numpy()), [float(s) for s in listed(block, "steps")])
    by = listed(block, "by", "")
    frame = frame[frame["step"].isin(steps)].copy()
    factor = block.option("multiply")
    if factor not in (None, "step"):
        raise BlockError(f"{block}: multiply is step, got {factor}")
    rows = []
    for key, group in frame.groupby(by, sort=True) if by else [((), frame)]:
        key = key if isinstance(key, tuple) else (key,)
        for metric in metrics:
            values = group[metric] * (group["step"] if factor else 1)
            per_step = values.groupby(group["step"]).agg(stat)
            rows.append([*key, ("k·" if factor else "") + metric, *(per_step.get(s, np.nan) for s in steps)])
    return f"{stat.capitalize()} over seeds at the logged step k nearest to the one asked for:\n\n" + table(
        [*by, "metric", *(f"k = {s}" for s in steps)], rows
    )


def order_kind(block: Block, headline) -> str:
    """At how many logged steps the metric's mean (median) over seeds is monotone in `by` (ties allowed),
    and the range of the steps where it is not; per series of the other `where` selections."""
    metric, stat = block.option("metric"), stat_of(block)
    x = block.option("by")
    direction = block.option("direction", "increasing")
    if x is None or direction not in ("increasing", "decreasing"):
        raise BlockError(f"{block}: needs by= and direction increasing or decreasing")
    frame = trajectories_of(block, headline, [metric])
    frame = frame[frame["step"] >= float(block.option("from", "0"))]
    curves = frame.groupby(["step", x])[metric].agg(stat).unstack(x).sort_index(axis=1)
    steps_diff = np.diff(curves.to_numpy(), axis=1)
    monotone = np.all(steps_diff >= 0 if direction == "increasing" else steps_diff <= 0, axis=1)
    failed = curves.index[~monotone]
    where = f"k = {sig(failed.min())}–{sig(failed.max())}" if len(failed) else DASH
    word = "non-decreasing" if direction == "increasing" else "non-increasing"
    return table(
        [f"{stat} {metric} {word} in {x}", "logged steps", "not at", f"{x} values"],
        [
            [
                f"{int(monotone.sum())} of {len(monotone)}",
                f"{sig(curves.index.min())}–{sig(curves.index.max())}",
                where,
                ", ".join(sig(v) for v in curves.columns),
            ]
        ],
    )


def ahead_kind(block: Block, headline) -> str:
    """At how many logged steps the metric's mean (median) over seeds is lower for `by` = `lower` than for
    `by` = `upper`, per value of `per`."""
    metric, stat, field = block.option("metric"), stat_of(block), block.option("by")
    lower, upper = block.option("lower"), block.option("upper")
    if None in (metric, field, lower, upper):
        raise BlockError(f"{block}: needs metric=, by=, lower= and upper=")
    frame = trajectories_of(block, headline, [metric])
    per = listed(block, "per", "")
    rows = []
    for key, group in frame.groupby(per, sort=True) if per else [((), frame)]:
        key = key if isinstance(key, tuple) else (key,)
        curves = group.groupby(["step", field])[metric].agg(stat).unstack(field)
        for name in (lower, upper):
            if name not in curves.columns.astype(str):
                raise BlockError(f"{block}: no {field} = {name}")
        curves.columns = curves.columns.astype(str)
        below = curves[lower] < curves[upper]
        later = below.index[~below]
        rows.append([*key, f"{int(below.sum())} of {len(below)}", f"{sig(later.max())}" if len(later) else DASH])
    return table([*per, f"{stat} {metric}: {lower} below {upper} at logged steps", "last step where not"], rows)


def fit_kind(block: Block, headline) -> str:
    """Least squares of ln y on ln x over the per-x medians of a final metric y (`abs=true`: of |y|),
    x in `range=lo,hi`, with the slope's 95 % interval (jaxmem.report.verdicts) and the per-seed slopes;
    `expect=lo,hi` judges the slope as the report judges one."""
    from jaxmem.report.capacity.fit import fit_line
    from jaxmem.report.text import spread
    from jaxmem.report.verdicts import slope_check, slope_text, slope_verdict

    runs = selected(required(headline.table("runs"), "runs", block), block)
    x, metric = block.option("x"), block.option("metric")
    column = metric if metric in runs else f"final_{metric}"
    if x not in runs or column not in runs:
        raise BlockError(f"{block}: runs.csv needs columns {x} and {column}")
    lo, hi = (float(v) for v in listed(block, "range", f"{runs[x].min()},{runs[x].max()}"))
    runs = runs[runs[x].between(lo, hi)]
    y = runs[column].abs() if block.option("abs") == "true" else runs[column]
    logs = pd.DataFrame({"x": np.log(runs[x].astype(float)), "y": np.log(y.astype(float)), "seed": runs["seed"]})
    medians = logs.groupby("x")["y"].median()
    fit = fit_line(medians.index, medians.to_numpy())
    seeds = [fit_line(g["x"], g["y"])["b"] for _, g in logs.groupby("seed")]
    name = f"ln |{metric}|" if block.option("abs") == "true" else f"ln {metric}"
    lines = [
        f"- {name} on ln {x} over {x} in [{sig(lo)}, {sig(hi)}], per-{x} medians ({fit['n']} points): "
        f"slope {slope_text(fit)}; per seed {spread(seeds, 3)} ({len(seeds)} seeds)"
    ]
    if block.option("expect"):
        band = tuple(float(v) for v in listed(block, "expect"))
        lines.append(f"- {slope_check(band, slope_verdict(fit, band))}")
    return "\n".join(lines)


def theory_kind(block: Block, headline) -> str:
    """li_thesis R4.10: per x the chapter-4 quantity beside the measured value (analyze.py's overlay)."""
    analyze = script_module(SWEEPS / "li_thesis" / "analyze.py")
    x, quantity, column = block.option("x"), block.option("quantity"), block.option("column")
    searches = headline.table("searches")
    if searches is not None:
        side = searches["censored"].fillna("")
        answer = searches["capacity"].where(side == "", np.where(side == "above", np.inf, 0.0))
        measured, rows, label = answer.groupby(searches[x]).median(), searches, "n* median"
    else:
        rows = required(headline.table("runs"), "runs", block)
        name = column if column in rows else f"final_{column}"
        measured, label = rows.groupby(x)[name].mean(), f"mean {name}"
    points = rows.groupby(x)[list(analyze.POINT_FIELDS)].first()
    predicted = points.apply(lambda p: analyze.predicted(p, quantity), axis=1)
    from scipy import stats

    rho = stats.spearmanr(measured, predicted).statistic
    body = table([x, label, quantity], [[k, measured[k], predicted[k]] for k in measured.index])
    return body + f"\n\nSpearman ρ(measured, {quantity}) over {len(measured)} points: {sig(rho)}"


def script_module(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gallery_kind(block: Block, headline) -> str:
    """The figure (copied next to docs/gallery.md by `main`) and the report's verdicts."""
    source = gallery_source(block, headline)
    if source is None:
        lines = ["The report draws no figure for this sweep.", ""]
    else:
        lines = [f"![{block.sweep}, {block.preset} preset]({gallery_figure(block).relative_to(block.path.parent)})", ""]
    if headline.verdicts.empty:
        lines.append(f"Verdict: the report states none for this sweep; its numbers are in {readme_link(block)}.")
    else:
        lines += ["Verdicts of the report:", ""]
        lines += [f"- {r.section}: {r.check}" for r in headline.verdicts.itertuples()]
    return "\n".join(lines)


def readme_link(block: Block) -> str:
    """A markdown link, from `block`'s file, to the README that discusses its sweep: the family's README*.md
    naming it, else the family's README.md, else the top-level README's measurements."""
    folder = spec_path(block.sweep).parent
    readmes = sorted(folder.glob("README*.md"))
    found = next((r for r in readmes if f"`{block.sweep}`" in r.read_text()), None)
    found = found or (folder / "README.md" if (folder / "README.md").exists() else None)
    target = found or ROOT / "README.md"
    relative = Path(os.path.relpath(target, block.path.parent)).as_posix() + ("" if found else "#measured")
    return f"[{target.relative_to(ROOT).as_posix()}]({relative})"


def gallery_figure(block: Block) -> Path:
    suffix = "" if block.preset == "quick" else f"-{block.preset}"
    return GALLERY.parent / "gallery" / f"{block.sweep}{suffix}.png"


def gallery_source(block: Block, headline) -> Path | None:
    """The report's plot a gallery block shows: its `plot=`, else the first of FIGURES the report drew (None
    when it drew none)."""
    name = block.option("plot")
    if name is not None and not (headline.folder / name).exists():
        raise BlockError(f"{block}: the report drew no {name}")
    name = name or next((p for p in FIGURES if (headline.folder / p).exists()), None)
    return headline.folder / name if name else None


def copy_figures(blocks: list[Block], headlines: dict) -> None:
    """Each rendered gallery block's figure, copied to docs/gallery/ (compact_png)."""
    for block in blocks:
        headline = headlines.get((block.sweep, block.preset))
        source = gallery_source(block, headline) if block.kind == "gallery" and headline is not None else None
        if source is not None:
            target = gallery_figure(block)
            target.parent.mkdir(parents=True, exist_ok=True)
            compact_png(source, target)


def compact_png(source: Path, target: Path) -> None:
    """`source` written to `target` at most GALLERY_WIDTH pixels wide in 256 colours: a third of the bytes
    of the report's RGBA plot, at its resolution."""
    from PIL import Image

    image = Image.open(source).convert("RGB")
    if image.width > GALLERY_WIDTH:
        height = round(image.height * GALLERY_WIDTH / image.width)
        image = image.resize((GALLERY_WIDTH, height), Image.Resampling.LANCZOS)
    image.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(target, "PNG", optimize=True)


# ---- the targets table: one row per target, each read from its own store

TARGET_HEADERS = ["target", "claim", "size run", "verdict", "device verdict", "why"]


def target_cells(block: Block, row: str) -> list[str]:
    cells = [c.strip() for c in row.split(" | ")]
    if len(cells) not in (5, 6):
        shape = "target | claim | sweep preset [section ...] | size | why [| judgement]"
        raise BlockError(f"{block}: a row is '{shape}': {row}")
    return cells


NOT_BUILT = "not built"  # a targets row's third cell for a target no sweep or test measures
NO_VERDICT = "**no automatic verdict**: the report has no check for this target"


def row_store(block: Block, row: str) -> Block | None:
    """The store a targets row reads, as a verdicts block whose args are the row's section prefixes; None for a
    target a test of the suite checks (its third cell the test's path, tests/...) or one not built."""
    cell = target_cells(block, row)[2]
    if cell.startswith("tests/") or cell == NOT_BUILT:
        return None
    words = shlex.split(cell)
    if len(words) < 2:
        raise BlockError(f"{block}: a row's third cell is 'sweep preset [section ...]': {row}")
    return Block(block.path, words[0], words[1], "verdicts", tuple(words[2:]), ())


def stores_of(block: Block) -> list[Block]:
    """The stores a block reads: its own, or a targets table's rows'."""
    if block.kind in ("counts", "shipped"):
        return []
    if block.kind != "targets":
        return [block]
    return [store for store in (row_store(block, row) for row in block.rows) if store is not None]


def verdict_cell(store: Block, headline, target: str, judged: list[str]) -> str:
    """The report's verdicts on `target` (those of the sections or claims naming it, or of the sections starting
    with the row's section prefixes), then the row's own judgement, marked "judged by hand", where it states one."""
    if headline is None:
        return "not run here"
    sections = headline.verdicts["section"]
    if store.args:
        keep = sections.map(lambda name: any(name.startswith(prefix) for prefix in store.args)).astype(bool)
    else:  # the target's name (R6.1, not R6.10) in the section or in the claim
        named = re.escape(target) + r"(?!\d)"
        keep = sections.str.contains(named) | headline.verdicts["check"].str.contains(named)
    kept = headline.verdicts[keep]
    lines = [f"{section.split(' / ')[-1]}: {check}" for section, check in zip(kept["section"], kept["check"])]
    lines = lines or [NO_VERDICT]
    lines += [f"judged by hand: {j}" for j in judged]
    return "<br>".join(lines).replace("|", "\\|")


def targets_kind(block: Block, headlines: dict) -> str:
    rows = []
    for row in block.rows:
        target, claim, test, size, why, *judged = target_cells(block, row)
        store = row_store(block, row)
        if store is None and test == NOT_BUILT:
            rows.append([target, claim, f"{NOT_BUILT}: {size}", "not run here (not built)", NO_DEVICE_RUN, why])
            continue
        if store is None:
            verdict = "<br>".join(f"{j} (a test of the suite checks it)" for j in judged) or "the row states no verdict"
            rows.append([target, claim, f"`{test}`: {size}", verdict, NO_DEVICE_RUN, why])
            continue
        headline = headlines.get((store.sweep, store.preset))
        seeds = f", {seeds_text(headline.seeds)}" if headline else " (not run here)"
        partial = f" **{headline.partial}**" if headline and headline.partial else ""  # a sweep still running
        run = f"`{store.sweep}` `{store.preset}`{seeds}{partial}"
        verdict = verdict_cell(store, headline, target, judged)
        rows.append([target, claim, f"{run}: {size}", verdict, device_cell(store, headlines, target), why])
    family = block.path.parent.name
    source = (
        f"*Each row from its sweep's store; regenerate: `python sweeps/readme_numbers.py --family {family}`. The "
        f"device verdict is the row's sweep's `{DEVICE_PRESET}` preset, run by `{CAMPAIGN_COMMAND}`.*"
    )
    return source + "\n\n" + table(TARGET_HEADERS, rows)


# ---- device runs (benchmarks/device_campaign.py): each claim's CPU verdict beside its device verdict

DEVICE_PRESET = "gpu"  # the preset a device campaign runs; its results ship as sweeps/<family>/data/<sweep>-gpu/
NO_DEVICE_RUN = "no device run"
CAMPAIGN_COMMAND = "PYTHONPATH=$PWD python benchmarks/device_campaign.py --out $OUT"


def device_stores(block: Block) -> list[Block]:
    """The device runs a gallery entry or a targets table shows beside its stores: each store's `gpu` preset."""
    if block.kind not in ("gallery", "targets"):
        return []
    return [dataclasses.replace(s, preset=DEVICE_PRESET) for s in stores_of(block) if s.preset != DEVICE_PRESET]


def run_meta(headline) -> dict:
    from jaxmem import load_results

    return load_results(headline.folder, "meta").set_index("key")["value"].to_dict()


def size_text(headline) -> str:
    """A run's size: preset, seeds, its grid's values (from the stored spec) and its runs, on its device."""
    meta = run_meta(headline)
    grid = json.loads(meta.get("resolved_spec", "{}")).get("grid", {})
    axes = [f"{name} {span_of(values)}" for name, values in grid.items() if isinstance(values, list)]
    runs = len(headline.table("runs")) if headline.table("runs") is not None else 0
    sizes = f"; {', '.join(axes)}" if axes else ""
    return f"`{headline.preset}`, {seeds_text(headline.seeds)}{sizes}; {runs} runs on {meta.get('device', '?')}"


def span_of(values: list) -> str:
    """A grid axis' values in words: '8–64 (7 values)', or the one value, or the values themselves."""
    if len(values) == 1 or not all(isinstance(v, (int, float)) for v in values):
        return "/".join(map(str, values))
    return f"{min(values):g}{DASH}{max(values):g} ({len(values)} values)"


def claim_outcomes(headline) -> dict[tuple[str, str], str]:
    """{(section, claim): "**OUTCOME** (measured)"} of the headline's verdicts (verdicts.json's, no diagnostic)."""
    from jaxmem.report.text import number

    return {
        (v.section, v.claim): f"**{v.outcomes}**" + (f" ({number(v.measured)})" if v.measured is not None else "")
        for v in headline.verdicts.itertuples()
    }


def gpu_presets_note(sweep: str) -> str:
    """The file that states each gpu preset's size and why (or why none): the family's own, else benchmarks/'s."""
    own = spec_path(sweep).parent / "GPU_PRESETS.md"
    return str((own if own.exists() else ROOT / "benchmarks" / "GPU_PRESETS.md").relative_to(ROOT))


def has_device_preset(sweep: str) -> bool:
    """Whether the sweep's spec has a `gpu` preset."""
    from jaxmem.spec.sweep import read_toml

    return DEVICE_PRESET in read_toml(spec_path(sweep)).get("presets", {})


def no_device_text(sweep: str) -> str:
    """Why a sweep shows no device verdict: its gpu preset has not run, or it has none (decided on the CPU)."""
    if not has_device_preset(sweep):
        return f"{NO_DEVICE_RUN} (no `{DEVICE_PRESET}` preset: {gpu_presets_note(sweep)} says why)"
    return f"{NO_DEVICE_RUN} yet"


def device_comparison(block: Block, headlines: dict) -> str:
    """A gallery entry's claims, each with its verdict at the CPU size and on the device with their sizes; one
    line saying so where the device has not run the sweep."""
    cpu, device = headlines[(block.sweep, block.preset)], headlines.get((block.sweep, DEVICE_PRESET))
    if device is None:
        run = f" (`{CAMPAIGN_COMMAND}` runs the `{DEVICE_PRESET}` presets)" if has_device_preset(block.sweep) else ""
        return f"Device: {no_device_text(block.sweep)}{run}."
    on_cpu, on_device = claim_outcomes(cpu), claim_outcomes(device)
    claims = list(dict.fromkeys([*on_cpu, *on_device]))
    rows = [[f"{s}: {c}", on_cpu.get((s, c), "not checked"), on_device.get((s, c), "not checked")] for s, c in claims]
    rows = [[cell.replace("|", "\\|") for cell in row] for row in rows]
    lines = [f"Per claim, at the CPU size ({size_text(cpu)}) and on the device ({size_text(device)}):", ""]
    return "\n".join(lines) + table(["claim", "CPU", "device"], rows)


def device_cell(store: Block, headlines: dict, target: str) -> str:
    """A targets row's verdict on the device (the row's sweep's `gpu` preset, read as the row reads its own
    store) with its size, or why there is none."""
    if store.preset == DEVICE_PRESET:
        return "the row's own run"
    device = headlines.get((store.sweep, DEVICE_PRESET))
    if device is None:
        return no_device_text(store.sweep)
    verdict = verdict_cell(dataclasses.replace(store, preset=DEVICE_PRESET), device, target, [])
    return f"{size_text(device)}:<br>{verdict}"


KINDS = {
    "capacity": capacity_kind,
    "verdicts": verdicts_kind,
    "section": section_kind,
    "csv": csv_kind,
    "final": final_kind,
    "steps": steps_kind,
    "order": order_kind,
    "ahead": ahead_kind,
    "fit": fit_kind,
    "theory": theory_kind,
    "gallery": gallery_kind,
}


# ---- stores, rendering, files


def store_folder(results: Path, block: Block) -> Path:
    return results / f"{block.sweep}-{block.preset}"


def shipped_folder(block: Block) -> Path:
    """sweeps/<family>/data/<sweep>-<preset>: the preset's shipped results (`jaxmem export`)."""
    return spec_path(block.sweep).parent / "data" / f"{block.sweep}-{block.preset}"


def run_preset(results: Path, block: Block) -> None:
    """`jaxmem run` the block's preset into its store folder (resumes; a finished sweep is left as it is)."""
    folder = store_folder(results, block)
    jaxmem = shutil.which("jaxmem", path=str(Path(sys.executable).parent)) or "jaxmem"
    command = [jaxmem, "run", str(spec_path(block.sweep)), "--preset", block.preset, "--out", str(folder)]
    print("running:", " ".join(command), flush=True)
    started = time.monotonic()
    done = subprocess.run(command, cwd=ROOT)
    if done.returncode != 0:
        sys.exit(f"readme_numbers: `{' '.join(command)}` failed with exit code {done.returncode}")
    print(f"ran {block.sweep} {block.preset} in {time.monotonic() - started:.0f} s", flush=True)


def another_spec(folder: Path, block: Block) -> str | None:
    """What differs between the store in `folder` and the block's sweep as its spec file is now (a store run
    before the spec changed what it computes), or None where they are the same sweep."""
    from jaxmem.cli.views import spec_against_store

    return spec_against_store(str(spec_path(block.sweep)), None, folder)[1]


def ship(results: Path, block: Block) -> None:
    """The block's store in `results` exported to its shipped folder (`jaxmem export`); a store of another spec
    than the sweep's file stops it (shipped results always describe the spec that ships with them)."""
    if stale := another_spec(store_folder(results, block), block):
        sys.exit(f"readme_numbers: not shipping {store_folder(results, block)}, a store of an older spec ({stale})")
    target = shipped_folder(block)
    manifest = export_results(store_folder(results, block), target)
    size = sum((target / name).stat().st_size for name in manifest["files"])
    print(f"shipped {target.relative_to(ROOT)}: {size / 1024:.0f} KiB, {manifest['elapsed_s']:.0f} s of sweep time")


def numbers_folder(results: Path, scratch: Path, block: Block) -> Path | None:
    """The output folder a block's store is read from: its own in `results` (where it describes the sweep as its
    spec file is now), else one imported into `scratch` from its shipped results; None when there is neither. A
    store of another spec is named on stderr and left as it is."""
    folder = store_folder(results, block)
    if (folder / "results.sqlite").exists():
        stale = another_spec(folder, block)
        if stale is None:
            return folder
        print(
            f"readme_numbers: {folder} is a store of an older spec ({stale}): read from the shipped results "
            f"instead; remove it and `{regenerate_command(block)}` to replace it",
            file=sys.stderr,
        )
    if not (shipped_folder(block) / MANIFEST).exists():
        return None
    import_results(shipped_folder(block), scratch / folder.name)
    return scratch / folder.name


def load_headlines(
    results: Path, blocks: list[Block], scratch: Path, rewrite: bool = True
) -> dict[tuple[str, str], object]:
    """The headline of every sweep the blocks name, read from its store or its shipped results (numbers_folder)
    (`rewrite`: its report written again first, with the `[report]` table of the sweep's spec as it is now, so
    an edited check shows without rerunning); None where it has neither."""
    from jaxmem.cli.views import edited_report_table
    from jaxmem.report.from_store import report
    from jaxmem.report.headline import headline

    found = {}
    for block in (store for block in blocks for store in stores_of(block) + device_stores(block)):
        key = (block.sweep, block.preset)
        if key in found:
            continue
        folder = numbers_folder(results, scratch, block)
        if folder is not None and (rewrite or not (folder / "report.md").exists()):
            report(folder, edited_report_table(str(spec_path(block.sweep)), None, folder))
        found[key] = None if folder is None else headline(folder)
    return found


SHIPPED_PRESETS = ("quick",)  # the presets whose results ship (sweeps/README.md); the others run on demand


def has_numbers(block: Block, headlines: dict) -> bool:
    """Whether every store the block reads was found (its own or shipped); a targets table needs only its rows'
    shipped presets: a row of another preset without a store says "not run here"."""
    stores = stores_of(block)
    if block.kind == "targets":
        stores = [store for store in stores if store.preset in SHIPPED_PRESETS]
    return all(headlines[(store.sweep, store.preset)] is not None for store in stores)


def lacks_shipped_data(block: Block, headlines: dict) -> bool:
    """Whether a store the block reads is of a shipped preset and was not found: the repository is missing data
    it should hold. A block of another preset without a store is rendered "not run here", which --check accepts:
    those presets (paper sizes, hours on a CPU) run on demand and are not quoted until they have."""
    return any(
        store.preset in SHIPPED_PRESETS and headlines[(store.sweep, store.preset)] is None for store in stores_of(block)
    )


# ---- --check: blocks compared within a tolerance, figures within FIGURE_TOLERANCE

RELATIVE = 1e-3  # numbers this close (relatively) agree
ABSOLUTE = 1e-6  # and numbers this close: round-off (a residual of 8.1e-08 against 1.0e-07 on a rerun)
NUMBER = re.compile(r"(?<![\w.])([-−]?\d+(?:\.\d+)?(?:e[-+]?\d+)?)(?![\w])")
PIXEL_DELTA = 64  # a pixel differs when a colour channel differs by more (of 255)
FIGURE_TOLERANCE = 0.005  # a figure differs when more than this share of its pixels differ, or its size does


def last_digit(number: str) -> tuple[int, float]:
    """A printed number's significant digits and the value of one unit of its last digit ("0.00132": 3, 1e-5;
    "1.34e+03": 3, 10; "1300": 2, 100)."""
    mantissa, _, exponent = number.lstrip("-−").partition("e")
    whole, _, decimals = mantissa.partition(".")
    digits = (whole + decimals).lstrip("0")
    if not decimals:
        digits = digits.rstrip("0")
        unit = 10.0 ** (len(whole) - max(len(digits), 1) if whole.strip("0") else 0)
    else:
        unit = 10.0 ** -len(decimals)
    return len(digits), unit * 10.0 ** int(exponent or 0)


def numbers_agree(first: str, second: str) -> bool:
    """Whether two printed numbers agree: equal, within RELATIVE or ABSOLUTE, or within one unit of the last
    digit of the one printed with 3 or more significant digits (the finer, where both are)."""
    a, b = (float(n.replace("−", "-")) for n in (first, second))
    units = [unit for digits, unit in map(last_digit, (first, second)) if digits >= 3]
    allowed = max(RELATIVE * max(abs(a), abs(b)), ABSOLUTE, min(units, default=0.0) * (1 + 1e-9))
    return a == b or abs(a - b) <= allowed


def blocks_agree(old: str, new: str) -> bool:
    """Whether two renderings of a block say the same: the same text between their numbers, each pair of
    numbers agreeing (numbers_agree)."""
    old_parts, new_parts = NUMBER.split(old), NUMBER.split(new)
    if len(old_parts) != len(new_parts) or old_parts[::2] != new_parts[::2]:
        return False
    return all(numbers_agree(a, b) for a, b in zip(old_parts[1::2], new_parts[1::2]))


def differing_blocks(path: Path, old: str, new: str) -> list[str]:
    """The diff of every block of `path` whose text `old` and `new` render beyond the tolerance."""
    name = str(path.relative_to(ROOT))
    diffs = []
    for before, after in zip(BLOCK.finditer(old), BLOCK.finditer(new)):
        if not blocks_agree(before.group(0), after.group(0)):
            lines = difflib.unified_diff(before.group(0).splitlines(True), after.group(0).splitlines(True), name, name)
            diffs.append("".join(lines) + "\n")
    return diffs


def figure_difference(rendered: Path, shipped: Path) -> str | None:
    """How figure `rendered` differs from `shipped` beyond FIGURE_TOLERANCE, or None where it does not."""
    from PIL import Image

    if not shipped.exists():
        return f"{shipped.relative_to(ROOT)} is missing"
    new, old = (np.asarray(Image.open(p).convert("RGB"), dtype=np.int16) for p in (rendered, shipped))
    if new.shape != old.shape:
        return f"{shipped.relative_to(ROOT)}: {old.shape[1]}×{old.shape[0]} px, rendered {new.shape[1]}×{new.shape[0]}"
    share = float((np.abs(new - old).max(axis=2) > PIXEL_DELTA).mean())
    if share <= FIGURE_TOLERANCE:
        return None
    return f"{shipped.relative_to(ROOT)}: {share:.1%} of its pixels differ from the figure rendered now"


def differing_figures(blocks: list[Block], headlines: dict, scratch: Path) -> list[str]:
    """How each gallery block's figure, rendered from its store, differs from the one in docs/gallery/."""
    found = []
    for block in blocks:
        source = gallery_source(block, headlines[(block.sweep, block.preset)]) if block.kind == "gallery" else None
        if source is not None:
            rendered = scratch / f"{block.sweep}-{block.preset}.png"
            compact_png(source, rendered)
            found.append(figure_difference(rendered, gallery_figure(block)))
    return [difference for difference in found if difference]


def render(block: Block, headline) -> str:
    if headline is None:
        return missing_text(block)
    if block.kind not in KINDS:
        raise BlockError(f"{block}: unknown kind (one of {', '.join(KINDS)})")
    return source_line(block, headline) + "\n\n" + KINDS[block.kind](block, headline).strip("\n")


def rewritten(path: Path, headlines: dict, chosen) -> str:
    """`path`'s text with every chosen block rendered again, then its counts blocks (from the text) and shipped
    blocks (from the shipped exports' manifests)."""

    def replace(match: re.Match) -> str:
        block = parse_block(path, match.group("what"))
        if block.kind in ("counts", "shipped") or not chosen(block):
            return match.group(0)
        if block.kind == "targets":
            body = targets_kind(block, headlines)
        else:
            body = render(block, headlines[(block.sweep, block.preset)])
        if block.kind == "gallery" and headlines[(block.sweep, block.preset)] is not None:
            body += "\n\n" + device_comparison(block, headlines)
        return f"{match.group(1)}{body}\n{match.group(4)}"

    text = BLOCK.sub(replace, path.read_text())
    tables = {"counts": lambda: counts_table(text), "shipped": shipped_table}

    def from_files(match: re.Match) -> str:
        kind = parse_block(path, match.group("what")).kind
        return f"{match.group(1)}{tables[kind]()}\n{match.group(4)}" if kind in tables else match.group(0)

    return BLOCK.sub(from_files, text)


def shipped_table() -> str:
    """The shipped block (`<!-- numbers: - - shipped -->`, sweeps/README.md): every shipped export's family,
    sweep, preset, sweep time (its `elapsed_s`: the sweep's own time where it ran), size, runs and trajectory
    rows, read from its manifest; then their count and total size."""
    rows, total = [], 0
    for manifest in sorted(SWEEPS.glob(f"*/data/*/{MANIFEST}")):
        folder, found = manifest.parent, json.loads(manifest.read_text())
        size = sum((folder / name).stat().st_size for name in found["files"])
        counts = {entry["table"]: entry["rows"] for entry in found["files"].values()}
        sweep = folder.name.removesuffix(f"-{found['preset']}")
        total += size
        rows.append(
            [
                folder.parent.parent.name,
                f"`{sweep}`",
                found["preset"],
                f"{found['elapsed_s']:.0f} s",
                f"{size / 1024:.0f} KiB",
                counts.get("runs", 0),
                counts.get("trajectories", 0),
            ]
        )
    headers = ["family", "sweep", "preset", "sweep time", "export", "runs", "trajectory rows"]
    return (
        table(headers, rows)
        + f"\n\n{len(rows)} preset{'' if len(rows) == 1 else 's'} shipped, {total / 1024:.0f} KiB in all."
    )


OUTCOMES = ("PASS", "FAIL", "INCONCLUSIVE", "not testable here")
STATED = re.compile(r"\*\*(" + "|".join(OUTCOMES) + r")\*\*")


def counts_table(text: str) -> str:
    """The counts block (`<!-- numbers: - - counts -->`): per paper (a `## ` heading), its entries (`### `),
    those not run here, and the verdicts of each outcome its generated blocks state."""
    rows = []
    for part in re.split(r"^## ", text, flags=re.M)[1:]:
        title, body = part.split("\n", 1)
        generated = "".join(m.group("body") for m in BLOCK.finditer(body))
        found = [m.group(1) for m in STATED.finditer(generated)]
        entries = len(re.findall(r"^### ", body, flags=re.M))
        not_run = generated.count("*Not run here")
        rows.append([title.split(', "')[0], entries, not_run, *(found.count(o) for o in OUTCOMES)])
    rows.append(["all", *(sum(r[i] for r in rows) for i in range(1, len(rows[0])))] if rows else [])
    return table(["paper", "entries", "not run here", *OUTCOMES], [r for r in rows if r])


def documents(family: str | None) -> list[Path]:
    """The READMEs of the sweeps' families (of `family` alone), sweeps/README.md (the shipped results) and the
    gallery."""
    readmes = sorted(SWEEPS.glob(f"{family or '*'}/README*.md"))
    shipped = [SWEEPS / "README.md"] if family is None and (SWEEPS / "README.md").exists() else []
    return readmes + shipped + ([GALLERY] if GALLERY.exists() else [])


def chooser(family: str | None, sweeps: set[str] | None, presets: set[str] | None = None):
    def chosen(block: Block) -> bool:
        stores = stores_of(block)
        if sweeps is not None and not any(store.sweep in sweeps for store in stores):
            return False
        if presets is not None and not any(store.preset in presets for store in stores):
            return False
        return family is None or any(family_of(store.sweep) == family for store in stores)

    return chosen


def comma_set(text: str | None) -> set[str] | None:
    return set(text.split(",")) if text else None


def ship_command(missing: list[Block], headlines: dict) -> str:
    """The commands that run and ship the presets the `missing` blocks lack, one per preset."""
    wanted: dict[str, set[str]] = {}
    for block in (store for block in missing for store in stores_of(block)):
        if block.preset in SHIPPED_PRESETS and headlines[(block.sweep, block.preset)] is None:
            wanted.setdefault(block.preset, set()).add(block.sweep)
    return "; ".join(
        f"python sweeps/readme_numbers.py --run --ship --presets {preset} --sweeps {','.join(sorted(sweeps))}"
        for preset, sweeps in sorted(wanted.items())
    )


def check(paths: list[Path], blocks: list[Block], headlines: dict, chosen, scratch: Path) -> int:
    """--check: every chosen block that has its numbers rendered and compared within the tolerance, every
    gallery figure re-rendered and compared; the differences printed; the exit code (see the docstring)."""
    found = [block for block in blocks if has_numbers(block, headlines)]
    missing = [block for block in blocks if lacks_shipped_data(block, headlines)]
    galleries = [block for block in found if block.kind == "gallery"]
    renders = {
        path: rewritten(path, headlines, lambda b: chosen(b) and not lacks_shipped_data(b, headlines)) for path in paths
    }
    diffs = [diff for path, text in renders.items() for diff in differing_blocks(path, path.read_text(), text)]
    figures = differing_figures(galleries, headlines, scratch)
    sys.stdout.writelines(diffs)
    sys.stdout.writelines(f"figure differs: {figure}\n" for figure in figures)
    print(
        f"readme_numbers: {len(blocks) - len(missing)} blocks compared ({len(blocks) - len(found) - len(missing)} "
        f"of them 'not run here': presets that do not ship), {len(diffs)} differ beyond the tolerance; "
        f"{len(galleries)} figures compared, {len(figures)} differ"
    )
    if missing:
        print(
            f"readme_numbers: no shipped data yet for {len(missing)} blocks (no store in --results, nothing in "
            f"sweeps/<family>/data/); ship it with: {ship_command(missing, headlines)}"
        )
    return 1 if diffs or figures else 3 if missing else 0


def write(paths: list[Path], blocks: list[Block], headlines: dict, chosen) -> None:
    """Every chosen block rendered again into its file, every gallery figure copied to docs/gallery/."""
    for path in paths:
        text = rewritten(path, headlines, chosen)
        if text != path.read_text():
            path.write_text(text)
            print(f"rewrote: {path.relative_to(ROOT)}")
    copy_figures(blocks, headlines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", action="store_true", help="run the selected blocks' presets first")
    parser.add_argument("--ship", action="store_true", help="export the selected presets' stores to sweeps/*/data/")
    parser.add_argument("--check", action="store_true", help="write nothing; compare within the tolerance")
    parser.add_argument("--family", help="only sweeps/FAMILY/ and its gallery entries")
    parser.add_argument("--sweeps", help="only the blocks of these sweeps (comma-separated)")
    parser.add_argument("--presets", help="only the blocks of these presets (comma-separated)")
    parser.add_argument("--results", type=Path, default=ROOT / "results" / "numbers", help="the stores' folder")
    parser.add_argument("--reuse-reports", action="store_true", help="read the reports as written, not rewritten")
    args = parser.parse_args(argv)
    chosen = chooser(args.family, comma_set(args.sweeps), comma_set(args.presets))
    try:
        paths = documents(args.family)
        blocks = [b for p in paths for b in blocks_of(p) if chosen(b)]
        if not blocks:
            print("readme_numbers: no block selected", file=sys.stderr)
            return 2
        stores = {(s.sweep, s.preset): s for block in blocks for s in stores_of(block) if chosen(s)}.values()
        for store in stores if args.run else ():
            run_preset(args.results, store)
        for store in stores if args.ship else ():
            if (store_folder(args.results, store) / "results.sqlite").exists():
                ship(args.results, store)
        with tempfile.TemporaryDirectory() as scratch:
            headlines = load_headlines(args.results, blocks, Path(scratch), rewrite=not args.reuse_reports)
            if args.check:
                return check(paths, blocks, headlines, chosen, Path(scratch))
            write(paths, blocks, headlines, chosen)
    except (BlockError, ExportError) as error:
        print(f"readme_numbers: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
