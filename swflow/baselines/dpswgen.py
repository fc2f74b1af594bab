"""DPSWgen (004 §4.2, 003): an MLP generator trained with the DP-smoothed sliced Wasserstein loss.

Each step draws fresh directions and gets the private batch's noisy sorted projections from
the same :class:`~swflow.privacy.PrivateTarget` release as DPSWflow-r, so it is accounted
exactly like DPSWflow-r. The generator's own projections are smoothed with the same σ (noise
on both sides), sorted, and matched to the released quantiles at the same levels; the loss is
the squared 1-D transport cost averaged over directions.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..registry import method
from ..privacy import PrivacySpec, PrivateTarget, check_rows, private_target
from ..sliced import quantile, rank_levels
from ._generator import MLPGenerator, TrainedGenerator

__all__ = ["GeneratorConfig", "DPSWGen", "make_dpswgen"]


@dataclass(frozen=True)
class GeneratorConfig:
    """steps : private releases (= generator updates); noise_dim : generator input size."""

    steps: int
    noise_dim: int = 16
    lr: float = 1e-3
    generated_per_step: int | None = None  # default: the private batch size
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self):
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1, got {self.steps}")
        if self.noise_dim < 1 or not self.lr > 0:
            raise ValueError("noise_dim must be >= 1 and lr > 0")


class DPSWGen(TrainedGenerator):
    """Generator from N(0, I) to the unit sphere of the latent space."""

    name = "dpswgen"

    def __init__(self, target: PrivateTarget, n_projections: int, config: GeneratorConfig):
        self.target, self.n_projections, self.config = target, n_projections, config
        self.generator = MLPGenerator(target.dim, noise_dim=config.noise_dim, on_sphere=True, seed=config.seed,
                                      device=config.device)
        self.rng = torch.Generator(device=config.device).manual_seed(config.seed)
        self.steps_done = 0
        self.losses: list[float] = []

    def _step(self, opt: torch.optim.Optimizer) -> None:
        theta = self.target.directions(self.n_projections, generator=self.rng, device=self.config.device,
                                       dtype=torch.float32)
        released, sigma = self.target.release(theta)
        m = released.shape[1]
        if m == 0:  # an empty Poisson batch: the release happened, nothing to learn from
            return
        fake = self.generator(self.config.generated_per_step or m, self.rng)
        proj = theta.T @ fake.T
        proj = proj + sigma * torch.randn(proj.shape, generator=self.rng, device=proj.device)
        values = proj.sort(dim=1).values
        matched = quantile(released.to(values.device), rank_levels(values.shape[1], device=values.device))
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
    plan = method("dpswgen").release_plan(steps=config.steps, dataset_size=data.shape[0], dim=data.shape[1],
                                          n_projections=n_projections, batch_size=batch_size)
    target = private_target(data, privacy, plan, privacy_seed=privacy_seed, device=config.device)
    return DPSWGen(target, n_projections, config)


NETWORK = MLPGenerator  # what a saved Synthesizer of this method rebuilds


def build(data: Tensor, *, privacy: PrivacySpec, steps: int, n_projections: int, batch_size: int,
          privacy_seed: int | None = None, seed: int = 0, device: str = "cpu", **options) -> DPSWGen:
    """The registry's entry (swflow.registry): common run settings, ``options`` of :class:`GeneratorConfig`."""
    return make_dpswgen(data, privacy=privacy, n_projections=n_projections, batch_size=batch_size,
                        privacy_seed=privacy_seed,
                        config=GeneratorConfig(steps=steps, seed=seed, device=device, **options))
