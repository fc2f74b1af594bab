"""LDP Sinkhorn generator (002): a generator trained on locally privatized records with entropic OT.

Every private record is released ONCE as y + N(0, σ² I) through
:class:`~swflow.privacy.LocallyReleasedTarget`; training is post-processing of those rows.
The loss is the entropic OT cost between generator outputs and a batch of noisy rows, with
squared-ℓ2 cost and regularization matched to the noise, λ = 2σ² (002), computed by POT's
log-domain Sinkhorn (torch backend, differentiable). Stopping rule: marginal violation below
``stop_threshold`` or ``max_iter`` iterations. ``loss='wasserstein'`` uses the unregularized
exact OT cost instead (002 eq. 23), which fits the *noisy* distribution, for contrast.
"""
from __future__ import annotations

from dataclasses import dataclass

import ot
import torch
from torch import Tensor

from ...privacy import LocallyReleasedTarget, PrivacySpec, check_rows, local_target
from ._generator import MLPGenerator, TrainedGenerator

__all__ = ["SinkhornConfig", "LDPSinkhornGen", "make_ldp_sinkhorn_gen"]

LOSSES = ("entropic", "wasserstein")


@dataclass(frozen=True)
class SinkhornConfig:
    """steps : generator updates; batch_size : noisy rows and generated points per update."""

    steps: int
    batch_size: int = 256
    loss: str = "entropic"
    on_sphere: bool = True  # latents live on the unit sphere; False for free outputs (e.g. 2-D toys)
    noise_dim: int = 16
    lr: float = 1e-3
    max_iter: int = 1000
    stop_threshold: float = 1e-6
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self):
        if self.steps < 1 or self.batch_size < 1:
            raise ValueError("steps and batch_size must be >= 1")
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {self.loss!r}")


class LDPSinkhornGen(TrainedGenerator):
    name = "ldp-sinkhorn-gen"

    def __init__(self, target: LocallyReleasedTarget, config: SinkhornConfig):
        self.target, self.config = target, config
        self.generator = MLPGenerator(target.dim, noise_dim=config.noise_dim, on_sphere=config.on_sphere,
                                      seed=config.seed, device=config.device)
        self.rng = torch.Generator(device=config.device).manual_seed(config.seed)
        self.regularization = 2.0 * target.local_noise_std ** 2  # λ = 2σ², matched to the noise (002)

    def _step(self, opt: torch.optim.Optimizer) -> None:
        noisy = self.target.released_rows().to(self.config.device)  # the one local release (cached)
        b = min(self.config.batch_size, noisy.shape[0])
        weights = torch.full((b,), 1.0 / b, device=noisy.device, dtype=noisy.dtype)
        batch = noisy[torch.randperm(noisy.shape[0], generator=self.rng, device=self.rng.device)[:b].to(noisy.device)]
        fake = self.generator(b, self.rng)
        cost = ot.dist(fake, batch)  # squared Euclidean
        if self.config.loss == "entropic":
            loss = ot.sinkhorn2(weights, weights, cost, reg=self.regularization, method="sinkhorn_log",
                                numItermax=self.config.max_iter, stopThr=self.config.stop_threshold)
        else:
            loss = ot.emd2(weights, weights, cost)
        opt.zero_grad()
        loss.backward()
        opt.step()


def make_ldp_sinkhorn_gen(data: Tensor, *, privacy: PrivacySpec, config: SinkhornConfig,
                          privacy_seed: int | None = None) -> LDPSinkhornGen:
    """Release every row of ``data`` (m, d) once with local Gaussian noise; the generator sees only that."""
    check_rows(data, name="private data")
    target = local_target(data, privacy, privacy_seed=privacy_seed, device=config.device)
    return LDPSinkhornGen(target, config)


NETWORK = MLPGenerator  # what a saved Synthesizer of this method rebuilds


def build(data: Tensor, *, privacy: PrivacySpec, steps: int, n_projections: int, batch_size: int,
          privacy_seed: int | None = None, seed: int = 0, device: str = "cpu", **options) -> LDPSinkhornGen:
    """The registry's entry (swflow.methods.registry); entropic OT uses no projections."""
    return make_ldp_sinkhorn_gen(data, privacy=privacy, privacy_seed=privacy_seed,
                                 config=SinkhornConfig(steps=steps, batch_size=batch_size, seed=seed, device=device,
                                                       **options))
