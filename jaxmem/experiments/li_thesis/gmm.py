"""The chapter-4 data model (Sec 4.3, spec §3.2): x ~ λ_1 N(μ_1, Σ_1) + λ_2 N(μ_2, Σ_2) with
μ_l = m_l·1 and Σ_l = s_l² ΛᵀDΛ (Λ = I and D = I, or Λ Haar-orthogonal and D = diag(1, 1.1, 1.2, ...)
as in Fig 4.4), and labels y ~ Bernoulli(H(W*, x)) (spec C1). Group 2 is the minority when λ_2 < ½.
Sample j of a set comes from the counters of row j (jaxmem.experiments.draws): the sets nest along n,
and the group means, scales and λ_2 only transform the same draws.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxmem.experiments import draws
from jaxmem.experiments.draws import haar
from jaxmem.experiments.li_thesis import sigmoid_net

COVARIANCES = ("identity", "rotated")


def spectrum(d: int, cov) -> jnp.ndarray:
    """diag D: ones, or 1, 1.1, 1.2, ... (Fig 4.4's D, continued past d = 5)."""
    return jnp.where(cov == 0, 1.0, 1.0 + 0.1 * jnp.arange(d))


def cov_norm(d: int, cov, scale) -> jnp.ndarray:
    """‖Σ_l‖ = s_l² max D."""
    return scale**2 * jnp.max(spectrum(d, cov))


def rotation(gaussian, cov) -> jnp.ndarray:
    """Λ: Haar-orthogonal from a Gaussian d×d matrix (spec C11), or I."""
    return jnp.where(cov == 0, jnp.eye(gaussian.shape[0]), haar(gaussian[None])[0])


def points(z, group, cfg, lam_rot) -> jnp.ndarray:
    """x = μ_g + s_g ΛᵀD^{1/2} z for standard normal rows z and groups g ∈ {0, 1}."""
    d = z.shape[-1]
    mean = jnp.where(group == 0, cfg["mu1"], cfg["mu2"])[..., None]
    scale = jnp.where(group == 0, cfg["sigma1"], cfg["sigma2"])[..., None]
    return mean + scale * (z * jnp.sqrt(spectrum(d, cfg["cov"]))) @ lam_rot


def training_set(key, count: int, d: int, w_star, lam_rot, cfg) -> dict:
    """`count` labelled samples: group g ~ Bernoulli(λ_2), x ~ N(μ_g, Σ_g), y ~ Bernoulli(H(W*, x))."""
    (z,) = draws.normal_matrices(key, [(count, d)])
    (u,) = draws.uniform_matrices(jax.random.fold_in(key, 1), [(count, 2)])
    group = (u[:, 0] < cfg["lam2"]).astype(jnp.int32)
    x = points(z, group, cfg, lam_rot)
    y = (u[:, 1] < sigmoid_net.prob(w_star, x)).astype(jnp.float32)
    return {"x": x, "y": y, "group": group}


def group_samples(key, count: int, d: int, lam_rot, cfg) -> jnp.ndarray:
    """Monte-Carlo points of each group (2, count, d), for the group and average risks."""
    z1, z2 = draws.normal_matrices(key, [(count, d), (count, d)])
    return jnp.stack(
        [points(z1, jnp.zeros(count, jnp.int32), cfg, lam_rot), points(z2, jnp.ones(count, jnp.int32), cfg, lam_rot)]
    )
