"""Privacy amplification by the Euler–Maruyama diffusion (004 Thm 3 via Balle et al. 2019).

A Markov kernel K with Dobrushin coefficient γ turns an (ε, δ)-DP output into an
(log(1 + γ(e^ε − 1)), γδ)-DP one. For X ← m(X) + sqrt(2hλ) Z acting on *all* n particles at once,
γ = TV(N(m, 2hλ I), N(m', 2hλ I)) = 2Φ(‖m − m'‖ / (2 sqrt(2hλ))) − 1, and with every particle's
drift clipped to norm C, ‖m − m'‖ ≤ 2hC·sqrt(n): γ grows with the number of released particles.
It applies only to the final particles alone — not when the trajectory or released
projections are published too.
"""
from __future__ import annotations

import math

from scipy.stats import norm

__all__ = ["diffusion_gamma", "amplified_guarantee"]


def diffusion_gamma(*, drift_clip: float | None, step_size: float, diffusion: float, n_particles: int) -> float:
    """Dobrushin coefficient of one Euler–Maruyama step over ``n_particles`` (1 = no amplification)."""
    if drift_clip is None or diffusion <= 0:
        return 1.0
    mean_gap = 2.0 * step_size * drift_clip * math.sqrt(n_particles)
    std = math.sqrt(2.0 * step_size * diffusion)
    return float(2.0 * norm.cdf(mean_gap / (2.0 * std)) - 1.0)


def amplified_guarantee(epsilon: float, delta: float, gamma: float) -> tuple[float, float]:
    """(log(1 + γ(e^ε − 1)), γδ)."""
    if not 0 <= gamma <= 1:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    if math.isinf(epsilon):
        return (math.inf if gamma > 0 else 0.0), gamma * delta
    return math.log1p(gamma * math.expm1(epsilon)), gamma * delta
