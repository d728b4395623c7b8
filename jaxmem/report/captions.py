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
import io
import math
import textwrap
from pathlib import Path

import matplotlib.image as mpimg
from matplotlib.figure import Figure

from jaxmem.report.files import save_figure
from jaxmem.report.text import DASH, rounded
from jaxmem.report.verdicts import Claim

CAPTION_POINTS = 7.5  # the caption's font size
CHARACTER_WIDTH = 0.55  # a character's mean width, in font sizes
LINE_SPACING = 1.45  # a caption line's height, in font sizes
MARGIN_INCHES = 0.08  # around the caption


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
        text = caption(claims, figure.about, preset, seeds)
        save_figure(captioned(figure.figure, text, figure.options), figure.path)


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


def captioned(fig, text: str, options: dict) -> Figure:
    """A new figure: `fig` as savefig's `options` render it, pixel for pixel, with `text` below it, left-aligned
    and wrapped to its width. (Drawn into `fig` itself, a caption would move whatever a layout engine or a
    tight bounding box places at the bottom of the figure, such as a legend below the panels.)"""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", **options)
    buffer.seek(0)
    image = mpimg.imread(buffer)
    dpi = options.get("dpi", fig.dpi)
    height, width = image.shape[:2]
    margin = MARGIN_INCHES * dpi
    characters = max(40, int((width - 2 * margin) / dpi * 72 / (CAPTION_POINTS * CHARACTER_WIDTH)))
    lines = textwrap.wrap(text, characters)
    below = round((len(lines) * CAPTION_POINTS * LINE_SPACING / 72 + 2 * MARGIN_INCHES) * dpi)
    out = Figure(figsize=(width / dpi, (height + below) / dpi), dpi=dpi, facecolor="white")
    out.figimage(image, xo=0, yo=below, origin="upper")
    top = (below - margin) / (height + below)
    out.text(margin / width, top, "\n".join(lines), ha="left", va="top", fontsize=CAPTION_POINTS, linespacing=1.2)
    return out
