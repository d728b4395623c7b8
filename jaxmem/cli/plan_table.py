"""The dry run's table of a first round's programs: one row per program where there are few, else one
row per decade of FLOPs per run-step (a size class), and a row of totals. Columns: programs, runs,
slots per device, chunks, padding waste, compile, step time, round time and memory per device."""

from __future__ import annotations

import math
from typing import Sequence

from jaxmem.cli.estimate import duration, size_text

ROWS = 12  # at most this many programs get a row each
HEADER = ("programs", "runs", "slots/dev", "chunks", "padding", "compile", "step ms", "round", "memory/dev")


def table(programs: Sequence, devices: int, budget: int) -> list[str]:
    """The table's lines, indented; `programs`: jaxmem.cli.dry_run.Program; `budget`: a run's steps."""
    if not programs:
        return []
    groups = rows(programs)
    labels = [_label(group, programs) for group in groups]
    lines = [[label, *_cells(group, devices, budget)] for label, group in zip(labels, groups)]
    lines.append(["all", *_cells(list(programs), devices, budget)])
    return _aligned([list(HEADER), *lines])


def rows(programs: Sequence) -> list[list]:
    """The programs of each row but the totals: one each where there are few, else size classes."""
    return [[p] for p in programs] if len(programs) <= ROWS else size_classes(programs)


def size_classes(programs: Sequence) -> list[list]:
    """The programs by decade of padded FLOPs per run-step, smallest first (NaN: one class)."""
    classes: dict = {}
    for p in programs:
        key = math.floor(math.log10(p.flops)) if math.isfinite(p.flops) and p.flops > 0 else math.inf
        classes.setdefault(key, []).append(p)
    return [classes[k] for k in sorted(classes)]


def _label(group: list, programs: Sequence) -> str:
    """A program's id and the sizes that tell it from the others; a class's count and FLOP range."""
    if len(programs) <= ROWS:
        p = group[0]
        varying = {k for k, _ in p.bucket.shape if len({q.bucket.shape_dict.get(k) for q in programs}) > 1}
        sizes = " ".join(f"{k}={v}" for k, v in p.bucket.shape if k in varying or len(programs) == 1)
        return f"{p.bucket.id} {sizes}".rstrip()
    flops = [p.flops for p in group]
    return f"{len(group)} at {min(flops):.1e}-{max(flops):.1e} FLOPs/run-step"


def _cells(group: list, devices: int, budget: int) -> list[str]:
    slots = sorted({p.slots // devices for p in group})
    wastes = [p.waste for p in group]
    fitting = [p.memory for p in group if p.memory is not None]
    over = sum(p.over for p in group)
    memory = size_text(max(fitting)) if fitting else "-"
    return [
        str(sum(p.runs for p in group)),
        _span(slots, "{}"),
        str(sum(p.chunks for p in group)),
        _span([min(wastes), max(wastes)], "{:.2f}x"),
        duration(sum(p.compile_seconds for p in group)),
        _span([min(p.step_seconds for p in group) * 1e3, max(p.step_seconds for p in group) * 1e3], "{:.2g}"),
        duration(sum(p.time().round_seconds(budget) for p in group)),
        memory + (f", {over} OVER" if over else ""),
    ]


def _span(values: list, form: str) -> str:
    low, high = min(values), max(values)
    return form.format(low) if low == high else f"{form.format(low)}-{form.format(high)}"


def _aligned(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
        for r in rows
    ]
