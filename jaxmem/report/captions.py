"""Figure captions: below its axes, each figure of a report gets a line in a small font, wrapped to the
figure's width, holding the claims it shows (claim, measured value with its 95 % interval, verdict) and the
sweep's size (preset and seeds), e.g.

    Relations / R2.2: N* = a + b·α*^-2: b in [0, inf]: 47 (95 % CI [16, 98]) → PASS; R² ≥ 0.9: 0.93 → PASS.
    quick preset, seeds 0–4.

The claims are the Claim records report.md states and verdicts.json holds (jaxmem.report.verdicts): a caption
reads them and decides nothing. A figure names the report sections whose claims it shows (`about`: prefixes
of Claim.section); diagnostics are left out. Inside `captioning()` (the report writer) a figure saved
through `save_captioned` waits until every section has stated its verdicts and is then captioned and saved;
outside it, it is saved at once without a caption.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
import textwrap
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg

from jaxmem.report.files import save_figure
from jaxmem.report.text import DASH, rounded
from jaxmem.report.verdicts import Claim

CAPTION_POINTS = 7.5  # the caption's font size
CHARACTER_WIDTH = 0.55  # a character's mean width, in font sizes
GAP_INCHES = 0.08  # between the figure's drawing and its caption


@dataclasses.dataclass(frozen=True)
class Pending:
    """A figure waiting for its caption: where it goes, which sections' claims it shows, savefig's options."""

    figure: object
    path: Path
    about: tuple[str, ...]
    options: dict


PENDING: contextvars.ContextVar[list[Pending] | None] = contextvars.ContextVar("captioned", default=None)


def save_captioned(fig, path: Path, about: tuple[str, ...] = (), **options) -> Path:
    """Save `fig` to `path` (save_figure's `options`), captioned with the claims of the sections `about`
    names when inside `captioning()`; at once and without a caption outside it."""
    pending = PENDING.get()
    if pending is None:
        return save_figure(fig, path, **options)
    pending.append(Pending(fig, Path(path), tuple(about), options))
    return Path(path)


@contextlib.contextmanager
def captioning(claims: list[Claim], preset: str, seeds):
    """Hold the figures saved inside the block (the list it yields); when it ends without an error, caption
    each with the `claims` of its sections (all stated by then) and the sweep's `preset` and `seeds`, and
    save it."""
    pending: list[Pending] = []
    token = PENDING.set(pending)
    try:
        yield pending
    finally:
        PENDING.reset(token)
    for figure in pending:
        add_caption(figure.figure, caption(claims, figure.about, preset, seeds))
        save_figure(figure.figure, figure.path, **{**figure.options, "bbox_inches": "tight"})


def caption(claims: list[Claim], about: tuple[str, ...], preset: str, seeds) -> str:
    """The caption's text: the figure's claims, section by section, then the preset and seeds."""
    shown = [c for c in claims if not c.diagnostic and c.section.startswith(about)] if about else []
    sections = dict.fromkeys(c.section for c in shown)
    parts = [f"{s}: " + "; ".join(claim_text(c) for c in shown if c.section == s) for s in sections]
    verdicts = ". ".join(parts) if parts else "No automatic verdict on this figure"
    return f"{verdicts}. {preset or 'no'} preset, {seeds_text(seeds)}."


def claim_text(claim: Claim) -> str:
    """e.g. "b in [0, inf]: 47 (95 % CI [16, 98]) → PASS"."""
    measured = ""
    if claim.measured is not None and math.isfinite(claim.measured):
        low, high = claim.interval or (math.nan, math.nan)
        measured = f": {rounded(claim.measured, low, high)}"
        if math.isfinite(low) and math.isfinite(high):
            measured += f" (95 % CI [{rounded(low, low, high)}, {rounded(high, low, high)}])"
    reason = f" ({claim.verdict.reason})" if claim.verdict.reason else ""
    return f"{claim.claim}{measured} → {claim.verdict.outcome}{reason}"


def seeds_text(seeds) -> str:
    """e.g. "seeds 0–4", "seeds 0, 2, 3", "seed 1", "no seeds"."""
    seeds = sorted(int(s) for s in seeds)
    if not seeds:
        return "no seeds"
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"seeds {seeds[0]}{DASH}{seeds[-1]}"
    return "seeds " + ", ".join(map(str, seeds))


def add_caption(fig, text: str) -> None:
    """`text` below everything `fig` draws, left-aligned with it and wrapped to its width."""
    renderer = FigureCanvasAgg(fig).get_renderer()  # a closed figure keeps no canvas of its own
    box = fig.get_tightbbox(renderer)  # inches
    width, height = fig.get_size_inches()
    characters = max(40, int(box.width * 72 / (CAPTION_POINTS * CHARACTER_WIDTH)))
    wrapped = "\n".join(textwrap.wrap(text, characters))
    fig.text(box.x0 / width, (box.y0 - GAP_INCHES) / height, wrapped, ha="left", va="top", fontsize=CAPTION_POINTS)
