"""DPSWgen (004 §4.2, 003): an MLP generator trained with the DP-smoothed sliced Wasserstein loss.

Each step draws fresh directions and gets the private batch's noisy sorted projections from
the same :class:`~swflow.privacy.PrivateTarget` release as DPSWflow-r, so it is accounted
exactly like DPSWflow-r. The generator's own projections are smoothed with the same σ (noise
on both sides) and moved toward the released quantiles.

The generator side's smoothing is an expectation over the noise. 004 estimates it with one draw
per generated point (``smoothing='sampled'``, kept to reproduce the paper); that draw's variance
grows with σ, and the projection release's σ is large even at a large ε (a release on 70
directions in d = 8 has sensitivity 2R‖Θ‖₂ ≈ 8), so the one-draw gradient is mostly noise: at
ε = 1000 the trained generator was further from the data than uniform noise on the sphere (SW2
0.171 against 0.141; without noise 0.019). The default (``smoothing='exact'``) computes the
expectation exactly on a grid, as the flows do (:func:`swflow.kernels.drift.exact_smoothed_drift`): the
loss is ½‖G(u) − sg(G(u) + D)‖², whose gradient is the smoothed SW first variation −D of each
generated point, the drift the flow would follow. Same release, same accounting; a lower-variance
estimator of the same gradient.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ...kernels.drift import exact_smoothed_drift, sampled_drift
from ...kernels.sliced import quantile, rank_levels
from ..plan import resolve_fixed
from ...privacy import PrivacySpec, PrivateTarget, check_rows, private_target
from ._generator import MLPGenerator, TrainedGenerator

__all__ = ["GeneratorConfig", "DPSWGen", "make_dpswgen"]


@dataclass(frozen=True)
class GeneratorConfig:
    """steps : private releases (= generator updates); noise_dim : generator input size."""

    steps: int
    noise_dim: int = 16
    lr: float = 1e-3
    generated_per_step: int | None = None  # default: the private batch size
    smoothing: str = "exact"  # the generator side's Gaussian smoothing: exact (default) or 004's one draw
    step_size: float = 1.0  # h: each release moves the generated points by h x drift (as a flow step)
    # fit the generator to the moved points with this many updates per release (post-processing of the release);
    # 0 takes one gradient step on the smoothed SW loss as 004 does. 20: experiments/generator_defaults.py (on a
    # 9-cluster law no figure uses, epsilon = 10: SW2 0.142 with 20 against 0.258 with 0; no-noise limit 0.028 / 0.030)
    inner_steps: int = 20
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self):
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1, got {self.steps}")
        if self.noise_dim < 1 or not self.lr > 0:
            raise ValueError("noise_dim must be >= 1 and lr > 0")
        if self.smoothing not in ("exact", "sampled"):
            raise ValueError(f"smoothing must be 'exact' or 'sampled', got {self.smoothing!r}")


class DPSWGen(TrainedGenerator):
    """Generator from N(0, I) to the unit sphere of the latent space."""

    name = "dpswgen"

    def __init__(self, target: PrivateTarget, n_projections: int, config: GeneratorConfig):
        self.target, self.n_projections, self.config = target, n_projections, config
        self.generator = MLPGenerator(target.dim, noise_dim=config.noise_dim, on_sphere=True, seed=config.seed,
                                      device=config.device)
        self.rng = torch.Generator(device=config.device).manual_seed(config.seed)
        self.losses: list[float] = []

    def _step(self, opt: torch.optim.Optimizer) -> None:
        theta = self.target.directions(self.n_projections, generator=self.rng, device=self.config.device,
                                       dtype=torch.float32)
        released, sigma = self.target.release(theta)
        m = released.shape[1]
        if m == 0:  # an empty Poisson batch: the release happened, nothing to learn from
            return
        u = self.generator.draw(self.config.generated_per_step or m, self.rng)
        fake = self.generator.map(u)
        released = released.to(fake.device)
        if self.config.smoothing == "exact":
            with torch.no_grad():  # the smoothed SW drift of every generated point, exact in the smoothing
                drift = (exact_smoothed_drift(fake, released, theta, noise_std=sigma) if sigma > 0 else
                         sampled_drift(theta.T @ fake.T, released, theta)).drift
            moved = (fake + self.config.step_size * drift).detach()
            if self.config.inner_steps:  # follow the flow: regress onto the moved points (post-processing)
                for _ in range(self.config.inner_steps):
                    loss = 0.5 * (self.generator.map(u) - moved).square().sum(dim=1).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                self.losses.append(float(loss.detach()))
                return
            loss = 0.5 * (fake - moved).square().sum(dim=1).mean()
        else:  # 004: one draw of the smoothing noise per generated point
            proj = theta.T @ fake.T
            proj = proj + sigma * torch.randn(proj.shape, generator=self.rng, device=proj.device)
            values = proj.sort(dim=1).values
            matched = quantile(released, rank_levels(values.shape[1], device=values.device))
            loss = (values - matched).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        self.losses.append(float(loss.detach()))


def make_dpswgen(data: Tensor, *, privacy: PrivacySpec, config: GeneratorConfig, n_projections: int,
                 batch_size: int, privacy_seed: int | None = None) -> DPSWGen:
    """DPSWgen on private rows ``data`` (m, d), accounted like DPSWflow-r with the same shape
    (ε = ∞ trains without noise, the paper's ε = ∞ column)."""
    check_rows(data, name="private data")
    plan = resolve_fixed("dpswgen", steps=config.steps, n_projections=n_projections, dataset_size=data.shape[0],
                         dim=data.shape[1], privacy=privacy, batch_size=batch_size)
    target = private_target(data, privacy, plan.release, privacy_seed=privacy_seed, device=config.device)
    return DPSWGen(target, n_projections, config)


NETWORK = MLPGenerator  # what a saved Synthesizer of this method rebuilds


def build(data: Tensor, *, privacy: PrivacySpec, steps: int, n_projections: int, batch_size: int,
          privacy_seed: int | None = None, seed: int = 0, device: str = "cpu", **options) -> DPSWGen:
    """The registry's entry (swflow.methods.registry): common run settings, ``options`` of :class:`GeneratorConfig`."""
    return make_dpswgen(data, privacy=privacy, n_projections=n_projections, batch_size=batch_size,
                        privacy_seed=privacy_seed,
                        config=GeneratorConfig(steps=steps, seed=seed, device=device, **options))
