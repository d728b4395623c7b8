"""The verdicts of the report's checks, decided and written the same way in every section (relations,
linear fits, the capacity slope): PASS, FAIL or INCONCLUSIVE, the last always with a short reason. A
check the data cannot decide says INCONCLUSIVE, never PASS.

- A check along x needs 3 or more distinct x values (2 points lie on every line).
- A slope against an expected band [lo, hi] (an open end for a sign: [0, inf] is "increasing"): its 95 %
  confidence interval decides. PASS when the interval lies inside the band, FAIL when it lies wholly
  outside, INCONCLUSIVE when it crosses an edge ("slope CI spans 0" for a sign). The interval is the
  t-interval of the least-squares slope over the fitted points (the per-x medians, the per-point means),
  n − 2 degrees of freedom, rather than a bootstrap over seeds: the points are what the fit uses, their
  scatter about the line holds both the seed spread and any misfit of the law, it needs no per-seed
  values (a censored search or a run without a value is ranked, not valued) and it is deterministic.
  Three points leave one degree of freedom (t = 12.7): a slope over three points must be very clean to
  be decided, and the verdict says so.
- A law's R² (min_r2): below the minimum FAILs. At or above it the claimed law must also be told apart
  from its neighbours: the same fit with a free exponent p, Y = a + b·(x^p − 1)/p (ln x at p = 0; Y = y
  for a line, ln y for a power law), profiled over p, gives p's 95 % interval (F-test of each p against
  the best one, n − 3 degrees of freedom). PASS when the claimed exponent (1 for a line in x, 0 for a
  power law) lies inside the interval and its neighbours, the claimed ± 1, outside; FAIL when the claimed
  one lies outside; otherwise INCONCLUSIVE: the range of x cannot tell the laws apart. Always
  INCONCLUSIVE with fewer than 4 distinct x (three parameters fit any three points). Where x takes the
  value 0 only p > 0 is profiled (x^p must exist there).
- A check with nothing to judge (no cell at the threshold, a single x) is "not testable here", with the
  reason: never a PASS, nor a yes.

Every verdict is written through `stated`, which renders it for report.md (bold, so that one pattern,
jaxmem.report.partial.VERDICT, finds them all) and, inside `stating()` (the report writer), records it as
a Claim for verdicts.json. A diagnostic (a check of a claim another section owns) is rendered without
bold and recorded with diagnostic = true: one claim, one verdict.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
import math

import numpy as np
from scipy import stats

from jaxmem.report.text import mean_std, number

PASS, FAIL, INCONCLUSIVE, NOT_TESTABLE = "PASS", "FAIL", "INCONCLUSIVE", "not testable here"
CONFIDENCE = 0.95
MIN_X = 3  # distinct x values a check along x needs
LAW_MIN_X = 4  # ... and a law against its free-exponent neighbours (three parameters)
EXPONENT_SPAN = 4.0  # the free exponent is profiled over the claimed one ± this
EXPONENT_STEP = 0.01


@dataclasses.dataclass(frozen=True)
class Verdict:
    outcome: str  # PASS, FAIL, INCONCLUSIVE or NOT_TESTABLE
    reason: str = ""

    def text(self, bold: bool = True) -> str:
        """e.g. "**PASS**", "**INCONCLUSIVE** (2 distinct x values)"; without `bold` for a diagnostic."""
        outcome = f"**{self.outcome}**" if bold else self.outcome
        return outcome + (f" ({self.reason})" if self.reason else "")


@dataclasses.dataclass(frozen=True)
class Claim:
    """One verdict as verdicts.json holds it: where report.md states it, what is checked, the measured
    value and its 95 % interval (where there is one), the band it is checked against (None: an open end)."""

    section: str
    claim: str
    verdict: Verdict
    measured: float | None = None
    interval: tuple[float, float] | None = None
    band: tuple[float | None, float | None] | None = None
    diagnostic: bool = False

    def record(self) -> dict:
        """The claim as a JSON object (NaN and ±inf as null)."""
        return {
            "section": self.section,
            "claim": self.claim,
            "measured": finite_or_none(self.measured),
            "interval": [finite_or_none(v) for v in self.interval] if self.interval else None,
            "band": [finite_or_none(v) for v in self.band] if self.band else None,
            "outcome": self.verdict.outcome,
            "reason": self.verdict.reason,
            "diagnostic": self.diagnostic,
        }


STATED: contextvars.ContextVar[list[Claim] | None] = contextvars.ContextVar("stated", default=None)


@contextlib.contextmanager
def stating():
    """Collect every claim `stated` inside the block into the list it yields."""
    claims: list[Claim] = []
    token = STATED.set(claims)
    try:
        yield claims
    finally:
        STATED.reset(token)


def stated(claim: Claim) -> str:
    """The claim's verdict as report.md writes it (plain for a diagnostic), recorded inside `stating()`."""
    claims = STATED.get()
    if claims is not None:
        claims.append(claim)
    return claim.verdict.text(bold=not claim.diagnostic)


def verdicts_json(claims: list[Claim], meta: dict, seeds: list[int], partial: str) -> str:
    """verdicts.json: every claim report.md states, in its order, each entry with the sweep's preset and
    seeds (so entries of many reports can be pooled), under the spec, preset, seeds and `partial` (report.md's
    line on an unfinished sweep, "" when finished). Numbers: NaN and ±inf are null (an open band end)."""
    preset, seeds = meta.get("preset", ""), sorted(int(s) for s in seeds)
    entries = [{**claim.record(), "preset": preset, "seeds": seeds} for claim in claims]
    top = {"spec": meta.get("spec", ""), "preset": preset, "seeds": seeds, "partial": partial, "verdicts": entries}
    return json.dumps(top, indent=1, ensure_ascii=False) + "\n"


def finite_or_none(value) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def decided(ok: bool, reason: str = "") -> Verdict:
    return Verdict(PASS if ok else FAIL, reason)


def inconclusive(reason: str) -> Verdict:
    return Verdict(INCONCLUSIVE, reason)


def not_testable(reason: str) -> Verdict:
    return Verdict(NOT_TESTABLE, reason)


def flat(name: str, verdict: Verdict | None) -> dict:
    """A verdict as two table columns, `<name>_verdict` and `<name>_reason` (empty without a check)."""
    return {f"{name}_verdict": verdict.outcome if verdict else "", f"{name}_reason": verdict.reason if verdict else ""}


def too_few_x(n_x: int, needed: int = MIN_X, noun: str = "distinct x value", nouns: str = "") -> Verdict | None:
    """INCONCLUSIVE with fewer than `needed` distinct x values (or other `noun`s, `nouns` in the plural when it
    is not noun + "s"); None otherwise."""
    return inconclusive(f"{n_x} {noun if n_x == 1 else nouns or noun + 's'}") if n_x < needed else None


def t_interval(estimate: float, se: float, dof: int) -> tuple[float, float]:
    """The two-sided CONFIDENCE t-interval; NaN without degrees of freedom or a standard error."""
    if dof < 1 or not math.isfinite(se):
        return math.nan, math.nan
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, dof)) * se
    return estimate - half, estimate + half


def proportion_interval(successes: int, trials: int) -> tuple[float, float]:
    """The exact (Clopper-Pearson) CONFIDENCE interval of a proportion."""
    found = stats.binomtest(successes, trials).proportion_ci(confidence_level=CONFIDENCE, method="exact")
    return float(found.low), float(found.high)


def mean_in_band(
    values, band: tuple[float, float], noun: str = "value"
) -> tuple[Verdict | None, float, tuple[float, float]]:
    """(verdict, mean, its 95 % interval) of a level claimed to lie in [lo, hi] (an infinite end open), over
    the finite `values` (runs: the seeds' spread decides): PASS when the interval lies inside the band, FAIL
    when wholly outside it, INCONCLUSIVE across an edge or with fewer than MIN_X values; None without values.
    The interval is the mean's t-interval, or for yes/no values (each 0 or 1) the exact binomial one of their
    proportion (3 of 3 successes: [0.29, 1], never the t-interval's zero width)."""
    values = np.asarray(values, float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return None, math.nan, (math.nan, math.nan)
    mean = float(values.mean())
    if np.isin(values, (0.0, 1.0)).all():
        low, high = proportion_interval(int(values.sum()), values.size)
    else:
        se = float(values.std(ddof=1) / math.sqrt(values.size)) if values.size > 1 else math.nan
        low, high = t_interval(mean, se, values.size - 1)
    few = too_few_x(values.size, MIN_X, noun)
    return few or interval_verdict(low, high, band, "mean's"), mean, (low, high)


def interval_verdict(low: float, high: float, band: tuple[float, float], what: str) -> Verdict:
    """The one rule for a 95 % interval [low, high] against a claimed band [lo, hi] (an infinite end open):
    PASS inside it, FAIL wholly outside it, else INCONCLUSIVE naming the edge it crosses; `what` names the
    interval's quantity in the reason ("slope", "mean's")."""
    lo, hi = band
    if lo <= low and high <= hi:
        return decided(True)
    if high < lo or low > hi:
        return decided(False, f"{what} CI {interval(low, high)} outside it")
    crossed = " and ".join(number(edge) for edge, out in ((lo, low < lo), (hi, high > hi)) if out)
    return inconclusive(f"{what} CI {interval(low, high)} crosses {crossed}")


def interval(lo: float, hi: float) -> str:
    """e.g. "[1.25, 3.4]"."""
    return f"[{number(lo)}, {number(hi)}]"


def slope_verdict(fit: dict, band: tuple[float, float]) -> Verdict:
    """The slope of `fit` (jaxmem.report.capacity.linear.fit_line: b_lo, b_hi, n_x) against [lo, hi]."""
    few = too_few_x(fit["n_x"])
    if few is not None:
        return few
    low, high = fit["b_lo"], fit["b_hi"]
    if not (math.isfinite(low) and math.isfinite(high)):
        return inconclusive("no slope interval")
    verdict = interval_verdict(low, high, band, "slope")
    if verdict.outcome == INCONCLUSIVE and 0 in band and low < 0 < high:
        return inconclusive("slope CI spans 0")
    return verdict


def slope_band(band: tuple[float, float]) -> str:
    """e.g. "b in [0, inf]"."""
    return f"b in [{number(band[0])}, {number(band[1])}]"


def slope_check(band: tuple[float, float], verdict: Verdict) -> str:
    """e.g. "b in [0, inf]: **PASS**"."""
    return f"{slope_band(band)}: {verdict.text()}"


def confidence(low: float, high: float) -> str:
    """ " (95 % CI [low, high])", or "" without an interval."""
    return f" (95 % CI {interval(low, high)})" if math.isfinite(low) and math.isfinite(high) else ""


def slope_text(fit: dict) -> str:
    """A fitted slope with its standard error and 95 % interval, e.g. "1.2 ± 0.1 (95 % CI [0.9, 1.5])"."""
    return mean_std(fit["b"], fit["b_se"], 3) + confidence(fit["b_lo"], fit["b_hi"])


def law_verdict(x, y, r2: float, min_r2: float, power: bool) -> tuple[Verdict, dict]:
    """The R² check of the law fitted to (x, y) (a line, or with `power` ln y on ln x), and the free
    exponent's best value and 95 % interval (p, p_lo, p_hi; {} where not profiled)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y) & ((x > 0) & (y > 0) if power else True)
    x, y = x[keep], (np.log(y[keep]) if power else y[keep])
    n_x = np.unique(x).size
    few = too_few_x(n_x)
    if few is not None:
        return few, {}
    if not math.isfinite(r2):
        return inconclusive("no R²: y is constant"), {}
    if r2 < min_r2:
        return decided(False, f"R² = {number(r2, 3)}"), {}
    claimed = 0.0 if power else 1.0
    return exponent_verdict(x, y, claimed, n_x)


def exponent_verdict(x: np.ndarray, y: np.ndarray, claimed: float, n_x: int) -> tuple[Verdict, dict]:
    """The claimed exponent against the free one (module docstring)."""
    few = too_few_x(n_x, LAW_MIN_X)
    if few is not None:
        return inconclusive(f"{few.reason}: a + b·x^p fits any {n_x} points"), {}
    if np.any(x < 0):
        return inconclusive("x < 0: no free-exponent law to compare"), {}
    steps = np.arange(-EXPONENT_SPAN, EXPONENT_SPAN + EXPONENT_STEP / 2, EXPONENT_STEP)
    grid = np.round(claimed + steps, 6) + 0.0  # + 0.0: no −0
    grid = grid[grid > 0] if np.any(x == 0) else grid  # x^p at x = 0 needs p > 0
    rss, syy = profile(x, y, grid), float(((y - y.mean()) ** 2).sum())
    dof = y.size - 3
    best = float(rss.min())
    inside = rss - best <= float(stats.f.ppf(CONFIDENCE, 1, dof)) * best / dof + 1e-12 * syy
    p = float(grid[int(np.argmin(rss))])
    low, high = float(grid[inside].min()), float(grid[inside].max())
    info = {"p": p, "p_lo": low, "p_hi": high}
    shown = "[" + ("≤ " if low == grid[0] else "") + number(low) + ", "
    shown += ("≥ " if high == grid[-1] else "") + number(high) + "]"
    if not inside[grid == claimed].any():
        return decided(
            False, f"free exponent p = {number(p)}, 95 % interval {shown}, excludes the claimed {number(claimed)}"
        ), info
    alike = [a for a in (claimed - 1, claimed + 1) if inside[grid == a].any()]
    if alike:
        others = " and ".join(number(a) + (" (ln x)" if a == 0 else "") for a in alike)
        return inconclusive(
            f"not distinguishable: a + b·x^p fits alike at p = {others} (95 % interval of p {shown})"
        ), info
    return decided(True, f"free exponent p in {shown}"), info


def profile(x: np.ndarray, y: np.ndarray, exponents: np.ndarray) -> np.ndarray:
    """The residual sum of squares of y = a + b·(x^p − 1)/p (ln x at p = 0) per exponent p; x is first
    scaled to a typical value of 1, which changes no fit, only the conditioning."""
    z = x / (math.exp(np.log(x).mean()) if np.all(x > 0) else x.mean())
    p = exponents[:, None]
    with np.errstate(divide="ignore"):  # ln 0 where x = 0, at p = 0, which the grid then leaves out
        t = np.where(p == 0, np.log(z)[None, :], (z[None, :] ** p - 1) / np.where(p == 0, 1, p))
    tc, yc = t - t.mean(axis=1, keepdims=True), y - y.mean()
    sxx, sxy = (tc**2).sum(axis=1), tc @ yc
    explained = np.divide(sxy**2, sxx, out=np.zeros_like(sxx), where=sxx > 0)
    return np.maximum(float(yc @ yc) - explained, 0.0)
