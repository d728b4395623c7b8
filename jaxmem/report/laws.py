"""The claim's law on a figure's own axes: a `[[report.relation]]` fitted as jaxmem.report.relations fits it
(a line or a power law over the per-x medians), drawn on a figure whose y is the relation's y and whose x
alone determines the relation's x (x = "alpha**-2" on a figure against alpha), so that the figure shows
the law the spec declares, with the same numbers as the claim's verdict, rather than a fit of its own."""

from __future__ import annotations

import dataclasses
import math
import textwrap

import numpy as np
import pandas as pd

from jaxmem.report.relations import relation_rows, section_of, summarise
from jaxmem.report.relations_plot import claims_law, fitted_curve
from jaxmem.report.text import rounded
from jaxmem.spec.expr import evaluate
from jaxmem.spec.report_relations import Relation
from jaxmem.spec.tables import names_of

LABEL_WIDTH = 60  # characters per line of a law's legend entry


def bare(expression: str) -> str:
    return "".join(expression.split())


@dataclasses.dataclass(frozen=True)
class Law:
    """A relation and its fit (jaxmem.report.relations.summarise's result for its one group)."""

    relation: Relation
    fit: dict

    @property
    def section(self) -> str:
        return section_of(self.relation)

    def curve(self, x: str, xs: np.ndarray) -> np.ndarray:
        """The law's y at each value of the figure's x (named `x`)."""
        xs = np.asarray(xs, dtype=float)
        if bare(self.relation.x) == bare(x):
            at = xs
        else:
            at = np.array([float(evaluate(self.relation.x, {x: float(v)})) for v in xs])
        return fitted_curve(self.relation, self.fit, at)

    def label(self) -> str:
        """e.g. "R2.2: N* = a + b·α*^-2: b = 47 (95 % CI [16, 98]) over the medians", wrapped for a legend."""
        b, low, high = self.fit["b"], self.fit["b_lo"], self.fit["b_hi"]
        interval = f" (95 % CI [{rounded(low, low, high)}, {rounded(high, low, high)}])" if math.isfinite(low) else ""
        text = f"{self.relation.label}: b = {rounded(b, low, high)}{interval} over the medians"
        return "\n".join(textwrap.wrap(text, LABEL_WIDTH))


def figure_relations(relations: tuple[Relation, ...], x: str, ys: set[str]) -> list[Relation]:
    """The relations whose claims are about a figure of y (any spelling in `ys`) against the config field or
    expression `x`: their y is the figure's, their x a function of the figure's x."""
    return [r for r in relations if bare(r.y) in map(bare, ys) and (bare(r.x) == bare(x) or names_of(r.x) <= {x})]


def figure_laws(
    relations: tuple[Relation, ...], runs: pd.DataFrame, searches: pd.DataFrame, x: str, ys: set[str]
) -> list[Law]:
    """The claimed laws (a fit with an expected slope or R²) of the `figure_relations` that have one group
    and no `where`, fitted to the runs (searches)."""
    laws = []
    for relation in figure_relations(relations, x, ys):
        if not claims_law(relation) or relation.group_by or relation.where:
            continue
        rows = relation_rows(relation, runs, searches)
        fits = summarise(relation, rows)[1] if not rows.empty else []
        if len(fits) == 1 and math.isfinite(fits[0].get("b", math.nan)):
            laws.append(Law(relation, fits[0]))
    return laws
