"""The Dobrushin coefficient of one Euler–Maruyama step (004 Thm 3 via Balle et al. 2019).

A Markov kernel K with Dobrushin coefficient γ turns an (ε, δ)-DP output into an
(log(1 + γ(e^ε − 1)), γδ)-DP one. swflow reports γ but never applies it: the last step's kernel
contracts only for a fixed previous state, which itself depends on every earlier release, and a
run publishes its releases and trajectory too, so the composed ε is what holds for a run.
For X ← m(X) + sqrt(2hλ) Z acting on *all* n particles at once,
γ = TV(N(m, 2hλ I), N(m', 2hλ I)) = 2Φ(‖m − m'‖ / (2 sqrt(2hλ))) − 1, and with every particle's
drift clipped to norm C, ‖m − m'‖ ≤ 2hC·sqrt(n): γ grows with the number of released particles.
"""
from __future__ import annotations

import math

from scipy.stats import norm

__all__ = ["diffusion_gamma"]


def diffusion_gamma(*, drift_clip: float | None, step_size: float, diffusion: float, n_particles: int) -> float:
    """Dobrushin coefficient of one Euler–Maruyama step over ``n_particles`` (1 = no amplification)."""
    if drift_clip is None or diffusion <= 0:
        return 1.0
    mean_gap = 2.0 * step_size * drift_clip * math.sqrt(n_particles)
    std = math.sqrt(2.0 * step_size * diffusion)
    return float(2.0 * norm.cdf(mean_gap / (2.0 * std)) - 1.0)
