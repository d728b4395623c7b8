"""The instance figure of an NTP sweep (Thrampoulidis 2024, Figs 1–3): the next-token probabilities P
(rows contexts, columns words, off-support in black; Fig. 2 left, and Fig. 3's eight contexts), and,
for d = 2, the contexts h̄_j with the rows w_v of W^mm (Fig. 1 left, Fig. 2 middle: words with one
support pattern share a row) and of W* (Fig. 2 right: they do not)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

MAX_CONTEXTS = 8  # Fig. 3 shows eight contexts


def context_name(j: int, m: int) -> str:
    """A, B, C, ... as in Fig. 1 when there are few contexts, else 1-based numbers."""
    return chr(ord("A") + j) if m <= 26 else str(j + 1)


def probabilities_panel(ax, P: np.ndarray) -> None:
    first = P[:MAX_CONTEXTS]
    shown = np.ma.masked_where(first <= 0, first)
    image = ax.imshow(shown, cmap=plt.get_cmap("viridis").with_extremes(bad="black"), vmin=0, aspect="auto")
    ax.set_xticks(range(P.shape[1]), [str(v + 1) for v in range(P.shape[1])])
    ax.set_yticks(range(len(shown)), [context_name(j, len(P)) for j in range(len(shown))])
    ax.set_xlabel("word v")
    ax.set_ylabel("context j")
    ax.set_title(f"p̂(v | context), first {len(shown)} of {len(P)} (black: off-support)", fontsize="medium")
    plt.colorbar(image, ax=ax, fraction=0.046)


def rows_panel(ax, H: np.ndarray, W: np.ndarray, title: str) -> None:
    """Contexts (black dots) and the rows of W as arrows from the origin, labelled by word."""
    for j, h in enumerate(H):
        ax.plot(*h, "ko")
        ax.annotate(context_name(j, len(H)), h, textcoords="offset points", xytext=(4, 4))
    for v, w in enumerate(W):
        ax.annotate("", w, (0, 0), arrowprops={"arrowstyle": "->", "color": f"C{v}", "lw": 1.5})
        ax.annotate(str(v + 1), w, color=f"C{v}", textcoords="offset points", xytext=(3, -10))
    reach = 1.15 * max(np.abs(W).max(), np.abs(H).max())
    ax.set_xlim(-reach, reach)
    ax.set_ylim(-reach, reach)
    ax.set_aspect("equal")
    ax.axhline(0, color="0.8", lw=0.5)
    ax.axvline(0, color="0.8", lw=0.5)
    ax.set_title(title, fontsize="medium")


def instance_figure(path: Path, H: np.ndarray, P: np.ndarray, W_mm: np.ndarray | None, W_star: np.ndarray) -> Path:
    planar = H.shape[1] == 2 and W_mm is not None
    fig, axes = plt.subplots(1, 3 if planar else 1, figsize=(15 if planar else 6, 4.5), squeeze=False)
    probabilities_panel(axes[0, 0], P)
    if planar:
        rows_panel(axes[0, 1], H, W_mm, "contexts and rows of W^mm (NTP-SVM)")
        rows_panel(axes[0, 2], H, W_star, "contexts and rows of W* (log-odds in F)")
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path
