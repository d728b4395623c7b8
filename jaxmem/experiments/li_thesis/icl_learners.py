"""The classical learners of Fig 6.4 (spec E6.3, R6.9), fitted on each test prompt's contexts (x_i, y_i)
and asked for the query's label, batched over prompts in JAX.

Logistic regression and the two SVMs are regularised kernel machines f(x) = Σ_i β_i k'(x_i, x) with
k' = k + 1 (a penalised intercept), k linear or Gaussian with sklearn's γ = 1 / (d_x · Var(x)) of the
prompt's contexts, C = 1, minimising ½ βᵀK'β + C Σ_i loss(y_i f(x_i)) by NEWTON_STEPS Newton steps from
β = 0: the logistic loss (sklearn's LogisticRegression), the squared hinge (sklearn's LinearSVC; also
used for the Gaussian kernel, where sklearn's SVC uses the plain hinge). k-NN: Euclidean, majority vote.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

LEARNERS = ("logistic", "svm_linear", "svm_rbf", "knn1", "knn3")
SETS = ("id", "ood")
METRICS = tuple(f"{learner}_{name}_error" for name in SETS for learner in LEARNERS)
NEWTON_STEPS = 15
C = 1.0


def newton_fit(gram, y, mask, logistic: bool):
    """Dual coefficients β of one prompt's kernel machine. Newton step: (I + C W K')Δ = β − C r with
    r = −∂loss/∂f and W = ∂²loss/∂f² (masked contexts: zero rows, β = 0)."""
    gram = gram * mask[:, None] * mask[None, :]
    eye = jnp.eye(gram.shape[0])

    def step(beta, _):
        f = gram @ beta
        if logistic:
            p = jax.nn.sigmoid(-y * f)
            r, w = y * p, p * (1.0 - p)
        else:
            active = (y * f < 1.0) * 1.0
            r, w = 2.0 * active * (y - f), 2.0 * active
        r, w = r * mask, w * mask
        delta = jnp.linalg.solve(eye + C * w[:, None] * gram, beta - C * r)
        return beta - delta, None

    beta, _ = jax.lax.scan(step, jnp.zeros_like(y), None, length=NEWTON_STEPS)
    return beta


def kernel_predict(x, y, mask, query, kind: str, logistic: bool):
    """The query's decision value of a kernel machine fitted on one prompt's active contexts."""
    if kind == "linear":
        kern = lambda u, v: u @ v.T  # noqa: E731
    else:
        count = jnp.sum(mask) * x.shape[-1]
        mean = jnp.sum(x * mask[:, None]) / count
        var = jnp.sum(((x - mean) * mask[:, None]) ** 2) / count
        gamma = 1.0 / (x.shape[-1] * jnp.maximum(var, 1e-12))
        kern = lambda u, v: jnp.exp(  # noqa: E731
            -gamma * (jnp.sum(u**2, -1)[:, None] + jnp.sum(v**2, -1)[None] - 2 * u @ v.T)
        )
    beta = newton_fit(kern(x, x) + 1.0, y, mask, logistic)
    return ((kern(query[None], x)[0] + 1.0) * mask) @ beta


def knn_predict(x, y, mask, query, k: int):
    """Majority vote of the k nearest active contexts (fewer when fewer are active)."""
    dist = jnp.where(mask, jnp.sum((x - query) ** 2, axis=-1), jnp.inf)
    _, nearest = jax.lax.top_k(-dist, min(k, x.shape[0]))
    return jnp.sum(y[nearest] * mask[nearest])


def predictions(x, y, mask, query) -> dict:
    """Decision values of every learner on one prompt (sign = predicted label)."""
    return {
        "logistic": kernel_predict(x, y, mask, query, "linear", True),
        "svm_linear": kernel_predict(x, y, mask, query, "linear", False),
        "svm_rbf": kernel_predict(x, y, mask, query, "rbf", False),
        "knn1": knn_predict(x, y, mask, query, 1),
        "knn3": knn_predict(x, y, mask, query, 3),
    }


def errors(name: str, data, dx: int) -> dict:
    """0-1 error (a tie counts as an error) of every learner on a prompt set (icl_transformer.prompt_set)."""
    x, y = data["contexts"][..., :dx], data["contexts"][..., dx]
    mask = data["mask"] * 1.0
    out = jax.vmap(predictions)(x, y, mask, data["query"][:, :dx])
    return {f"{learner}_{name}_error": jnp.mean(data["z"] * f <= 0.0) for learner, f in out.items()}
