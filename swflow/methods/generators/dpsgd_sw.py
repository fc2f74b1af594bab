"""Clipped DP sliced-Wasserstein-gradient generator (000/001): DP-SGD on the exact SW gradient.

The private latents X (a fixed-size batch of b rows per step) are the target; the generator's
outputs h_φ(z_j) (m per step) the source. Per direction ω the exact gradient of W₂² with respect
to the generated projections v_j = ⟨ω, h_j⟩ is (000 Prop. 3.1–3.2, unequal sizes allowed)

    ∂W₂²/∂v_j = 2 Σ_i R_{σ(i),τ(j)} (v_j − u_i),   R_{r,s} = |((r−1)/b, r/b] ∩ ((s−1)/m, s/m]|,

with u_i = ⟨ω, x_i⟩ and σ, τ the ranks. The parameter gradient is Σ_j J_jᵀ a_j, a_j the
direction-average of those derivatives times ω. Two clippings make its sensitivity provable:
activations ‖h_j‖ ≤ M (the generator ends on the unit sphere, then is projected on the M-ball)
and per-sample Jacobians ‖J_j‖₂ ≤ L (each J_j = ∂h_j/∂φ, computed with torch.func, is scaled
by min(1, L/‖J_j‖₂)). With the private side parameter-free (L₁ = 0) and ‖x‖ ≤ R, 000 Theorem
A.1(a) bounds the ℓ2 sensitivity under replace-one by 4·max(M, R)·L / b, with the batch size b
in place of n (a replaced record changes at most one row of a fixed-size batch). Gaussian noise
of that scale times the multiplier goes on the gradient, through the privacy package, one
release per step, accounted with sampling without replacement like DPSWflow-r.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.func import functional_call, jacrev, vmap

from ...kernels.sliced import random_directions
from ...core.config import ClippedGradientOptions
from ..plan import resolve_fixed
from ...privacy import PrivacySpec, PrivateTarget, check_rows, private_target
from ...privacy.sensitivity import SensitivityBound
from ...simulate.rng import seeded
from ._generator import TrainedGenerator

__all__ = ["ClippedGradientConfig", "ClippedGradientOptions", "ClippedGenerator", "DPSGDSWGen", "make_dpsgd_sw_gen", "r_weights", "w2_gradient_source",
           "gradient_sensitivity"]


def r_weights(n: int, m: int, *, dtype=torch.float64, device=None) -> Tensor:
    """R (n, m): overlap lengths of the rank cells ((r−1)/n, r/n] and ((s−1)/m, s/m] (000 Prop. 3.1).

    Rows sum to 1/n, columns to 1/m; R = I/n when n = m.
    """
    i = torch.arange(n, dtype=dtype, device=device)[:, None]
    j = torch.arange(m, dtype=dtype, device=device)[None, :]
    hi = torch.minimum((i + 1) / n, (j + 1) / m)
    lo = torch.maximum(i / n, j / m)
    return (hi - lo).clamp(min=0)


def w2_gradient_source(target: Tensor, source: Tensor) -> Tensor:
    """∂W₂²(P_target, P_source)/∂source of 1-D empirical measures, batched over rows.

    target : (k, n), source : (k, m) -> (k, m); 2 (v_j/m − Σ_r R[r, τ(j)] u_(r)) by Prop. 3.2,
    using that each column of R sums to 1/m.
    """
    n, m = target.shape[1], source.shape[1]
    weights = r_weights(n, m, dtype=source.dtype, device=source.device)
    matched = target.sort(dim=1).values @ weights  # (k, m): Σ_r R[r, s] u_(r) for each source rank s
    ranks = source.argsort(dim=1).argsort(dim=1)
    return 2.0 * (source / m - matched.gather(1, ranks))


def gradient_sensitivity(*, activation_clip: float, jacobian_clip: float, norm_bound: float,
                         batch_size: int) -> SensitivityBound:
    """000 Theorem A.1(a) with L₁ = 0: Δ ≤ 4 · max(M, R) · L / b under replace-one."""
    bound = max(activation_clip, norm_bound)
    return SensitivityBound(kind="clipped-sw-gradient (000 Thm 4.1/A.1)", squared_gain=1.0,
                            factor=4.0 * bound * jacobian_clip / batch_size, failure_probability=0.0)


@dataclass(frozen=True, kw_only=True)
class ClippedGradientConfig(ClippedGradientOptions):
    """steps : private releases (= generator updates); activation_clip M; jacobian_clip L."""

    steps: int
    hidden: tuple[int, ...] = (128, 128)
    noise_dim: int = 8
    lr: float = 1e-3
    generated_per_step: int | None = None  # default: the private batch size
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self):
        super().__post_init__()
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1, got {self.steps}")
        if not self.lr > 0:
            raise ValueError("lr must be > 0")


class ClippedGenerator(nn.Module):
    """Plain MLP (no batch norm: per-sample Jacobians must not couple samples), output on the M-ball."""

    def __init__(self, noise_dim: int, dim: int, hidden: tuple[int, ...], radius: float, device: str = "cpu"):
        super().__init__()
        self.init_kwargs = {"noise_dim": noise_dim, "dim": dim, "hidden": list(hidden), "radius": radius}
        self.noise_dim, self.device = noise_dim, device
        layers, width = [], noise_dim
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        self.net = nn.Sequential(*layers, nn.Linear(width, dim)).to(device)
        self.radius = radius

    def forward(self, z: Tensor) -> Tensor:
        out = self.net(z)
        out = out / out.norm(dim=-1, keepdim=True).clamp(min=1e-12)  # the latent sphere
        return out * min(1.0, self.radius)  # activation clip: ‖h‖ ≤ M

    @torch.no_grad()
    def sample(self, n: int, *, seed: int = 0) -> Tensor:
        """n points on the sphere of radius min(1, M) (post-processing: no privacy cost)."""
        g = torch.Generator(device=self.device).manual_seed(seed)
        return self(torch.randn(n, self.noise_dim, generator=g, device=self.device))


class DPSGDSWGen(TrainedGenerator):
    """Generator trained by noisy clipped exact SW gradients; one private release per step."""

    name = "dpsgd-sw-gen"

    def __init__(self, target: PrivateTarget, n_projections: int, config: ClippedGradientConfig):
        self.target, self.n_projections, self.config = target, n_projections, config
        with seeded(config.seed):  # the weight initialisation
            self.generator = ClippedGenerator(config.noise_dim, target.dim, config.hidden, config.activation_clip,
                                              device=config.device)
        self.rng = torch.Generator(device=config.device).manual_seed(config.seed)
        norm_bound = target.calibration.spec.norm_bound if target.private else 1.0
        # a full batch (batch_size None) is a batch of all n rows, n public under replace-one
        self.sensitivity = gradient_sensitivity(activation_clip=config.activation_clip,
                                                jacobian_clip=config.jacobian_clip, norm_bound=norm_bound,
                                                batch_size=target.batch_size or target.size)

    def clipped_jacobians(self, z: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Outputs h (m, d), per-sample Jacobians J (m, d, P) and the clip factors c (m,): ‖c_j J_j‖₂ ≤ L.
        The factors are applied to the vector each J_jᵀ multiplies, which is cheaper than scaling J."""
        params = {k: v.detach() for k, v in self.generator.named_parameters()}

        def one(p, zi):
            return functional_call(self.generator, p, (zi[None],))[0]

        jac = vmap(jacrev(one), in_dims=(None, 0))(params, z)  # dict of (m, d, *shape)
        flat = torch.cat([jac[k].reshape(z.shape[0], self.target.dim, -1) for k in params], dim=2)
        # ‖J‖₂² is the largest eigenvalue of the d × d Gram matrix J Jᵀ: ten times cheaper than an SVD of the
        # d × P Jacobian; the factor 1 + 1e-4 covers the eigensolver's rounding, so ‖J_j‖₂ ≤ L holds surely
        gram = flat @ flat.transpose(1, 2)
        spectral = torch.linalg.eigvalsh(gram)[:, -1].clamp(min=0).sqrt() * (1 + 1e-4)  # (m,)
        clip = (self.config.jacobian_clip / spectral.clamp(min=1e-12)).clamp(max=1.0)
        with torch.no_grad():
            h = self.generator(z)
        return h, flat, clip

    def _step(self, opt: torch.optim.Optimizer) -> None:
        m = self.config.generated_per_step or self.target.batch_size or self.target.size
        z = torch.randn(m, self.config.noise_dim, generator=self.rng, device=self.config.device)
        theta = random_directions(self.n_projections, self.target.dim, generator=self.rng, device=self.config.device)
        h, jac, clip = self.clipped_jacobians(z)
        v = theta.T @ h.T  # (k, m): generated side, public

        def gradient(batch: Tensor) -> Tensor:  # runs inside the privacy package on the private batch
            u = theta.T @ batch.to(theta.dtype).T  # (k, b)
            a = w2_gradient_source(u, v).T @ theta.T / theta.shape[1] * clip[:, None]  # (m, d)
            return a.reshape(-1) @ jac.reshape(-1, jac.shape[2])  # Σ_j (c_j J_j)ᵀ a_j: one matrix-vector product

        grad, _ = self.target.release_statistic(gradient, self.sensitivity)
        offset = 0
        for p in self.generator.parameters():
            p.grad = grad[offset:offset + p.numel()].view_as(p).to(p.dtype)
            offset += p.numel()
        opt.step()


def make_dpsgd_sw_gen(data: Tensor, *, privacy: PrivacySpec, config: ClippedGradientConfig, n_projections: int,
                      batch_size: int, privacy_seed: int | None = None) -> DPSGDSWGen:
    """The clipped DP-SW-gradient generator on private rows ``data`` (m, d): replace-one adjacency,
    fixed-size batches without replacement, one Gaussian release of the gradient per step."""
    check_rows(data, name="private data")
    if privacy.private and privacy.adjacency != "replace-one":
        raise ValueError("000 Theorem 4.1 bounds the sensitivity for replace-one neighbours with a fixed batch "
                         "size; use adjacency='replace-one'")
    plan = resolve_fixed("dpsgd-sw-gen", steps=config.steps, n_projections=n_projections,
                         dataset_size=data.shape[0], dim=data.shape[1], privacy=privacy, batch_size=batch_size)
    target = private_target(data, privacy, plan.release, privacy_seed=privacy_seed, device=config.device)
    return DPSGDSWGen(target, n_projections, config)


NETWORK = ClippedGenerator  # what a saved Synthesizer of this method rebuilds


def build(data: Tensor, *, privacy: PrivacySpec, steps: int, n_projections: int, batch_size: int,
          privacy_seed: int | None = None, seed: int = 0, device: str = "cpu", **options) -> DPSGDSWGen:
    """The registry's entry (swflow.methods.registry): common run settings, ``options`` of
    :class:`ClippedGradientConfig`."""
    return make_dpsgd_sw_gen(data, privacy=privacy, n_projections=n_projections, batch_size=batch_size,
                             privacy_seed=privacy_seed,
                             config=ClippedGradientConfig(steps=steps, seed=seed, device=device, **options))
