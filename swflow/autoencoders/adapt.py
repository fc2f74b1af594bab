"""DP adaptation of a public decoder to the private images: DP-SGD through Opacus, in the run's budget.

With a frozen public decoder the flow can only move within what the decoder can draw. When the private
images show what the public ones never did (classes left out of the public data), the decoder is
fine-tuned on them with DP-SGD: Opacus computes each image's gradient, clips it to norm C and adds
Gaussian noise to the sum, every step, on a batch drawn by the privacy noise source (fixed size without
replacement under replace-one, Poisson under zero-out). The per-image loss is the decoder's public
training loss without its critic: the 4×-pooled L1 to the image and the code consistency through the
frozen encoder (swflow/autoencoders/adversarial.py), so the decoder learns the private images' coarse
structure and keeps the detail it learned from public images.

Privacy. One image's gradient enters a step's sum clipped to norm C; replacing it (by any image, or by
the null record, the zero image) moves the sum by at most 2C. A step is a sampled Gaussian mechanism of
multiplier z = σ / 2C (Opacus's noise multiplier σ / C is 2z). The budget is split by a public setting
(``adapt_share``): the histogram release is calibrated alone to (1 − share)·ε, then the DP-SGD multiplier
is the smallest whose composition with it (dp-accounting, from the ledger's events) stays within ε. The
run's ledger holds both releases; the reported ε is their composition.

The adapted decoder saw private data: it is an output of the run (its directory), never a checkpoint
that claims public-only training, and its metadata says what it saw and under which (ε, δ).
"""
from __future__ import annotations

import copy
import math
from dataclasses import replace

import numpy as np
import torch
from torch import Tensor, nn

from ..pipeline.config import AdaptSettings, PrivacySpec
from ..privacy.ledger import MechanismEvent

__all__ = ["ADAPT_BOUND", "adaptation_event", "split_budget", "dp_sgd_optimizer", "adapt_decoder"]

#: the sensitivity bound a DP-SGD event records
ADAPT_BOUND = "per-image clipped gradient (Opacus), replaced: 2C"


def adaptation_event(*, multiplier: float, settings: AdaptSettings, dataset_size: int, adjacency: str,
                     steps: int | None = None) -> MechanismEvent:
    """The ledger event of ``steps`` (default: all planned) DP-SGD steps at ``multiplier`` (relative to 2C)."""
    batch = min(settings.adapt_batch_size, dataset_size)
    sampling = "none" if batch == dataset_size else ("without-replacement" if adjacency == "replace-one" else "poisson")
    sensitivity = 2.0 * settings.adapt_clip
    return MechanismEvent(noise_multiplier=multiplier, noise_std=multiplier * sensitivity, sensitivity=sensitivity,
                          sensitivity_bound=ADAPT_BOUND, delta_sensitivity=0.0, sampling=sampling, sample_size=batch,
                          dataset_size=dataset_size, n_projections=0, count=steps or settings.adapt_steps)


def split_budget(spec: PrivacySpec, histogram_plan, settings: AdaptSettings) -> tuple[PrivacySpec, float]:
    """(the histogram's PrivacySpec, the DP-SGD multiplier) that split ``spec``'s ε by ``adapt_share``: the
    histogram alone at (1 − share)·ε, then the smallest DP-SGD multiplier whose composition with the histogram's
    release (dp-accounting, as the run will account it) is within ε."""
    from ..privacy import calibrate, plan_events
    from ..privacy.accountants import epsilon_from_events

    if spec.epsilon is None or not math.isfinite(spec.epsilon):
        raise ValueError("the adaptation splits a finite epsilon: give epsilon, not a noise multiplier")
    histogram_spec = replace(spec, epsilon=(1.0 - settings.adapt_share) * spec.epsilon)
    cal = calibrate(histogram_spec, histogram_plan)
    histogram = plan_events(histogram_plan, adjacency=spec.adjacency, multiplier=cal.noise_multiplier,
                            bound="histogram", delta_theta=0.0)

    def epsilon(z: float) -> float:
        event = adaptation_event(multiplier=z, settings=settings, dataset_size=histogram_plan.dataset_size,
                                 adjacency=spec.adjacency)
        return epsilon_from_events((*histogram, event), delta=spec.delta, adjacency=spec.adjacency)

    lo, hi = 1e-2, 1.0
    while epsilon(hi) > spec.epsilon:
        lo, hi = hi, hi * 2.0
        if hi > 1e4:
            raise ValueError(f"the histogram's share of epsilon = {spec.epsilon:g} leaves the adaptation nothing "
                             "under composition: raise adapt_share, or epsilon")
    while hi > lo * (1.0 + 1e-3):  # bisection in log z to 0.1% (each step one accounting); hi holds the budget
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if epsilon(mid) <= spec.epsilon else (mid, hi)
    return histogram_spec, hi


class _FrozenAffine(nn.Module):
    """A BatchNorm in eval mode as the per-channel affine map it computes, with no parameters: Opacus refuses
    BatchNorm (it mixes the images of a batch), and a decoder used for sampling runs it in eval mode anyway."""

    def __init__(self, bn: nn.BatchNorm2d):
        super().__init__()
        scale = bn.weight.detach() / torch.sqrt(bn.running_var + bn.eps)
        self.register_buffer("scale", scale)
        self.register_buffer("shift", bn.bias.detach() - bn.running_mean * scale)

    def forward(self, x: Tensor) -> Tensor:
        return x * self.scale[None, :, None, None] + self.shift[None, :, None, None]


def _unfold(module: nn.Module) -> list[tuple[nn.Module, str, nn.BatchNorm2d]]:
    """Replace every BatchNorm2d of ``module`` by its frozen affine map; return what to fold back."""
    swapped = []
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.BatchNorm2d):
                setattr(parent, name, _FrozenAffine(child))
                swapped.append((parent, name, child))
    return swapped


def _fold(swapped) -> None:
    """Put the BatchNorms back with statistics that compute the (unchanged) affine maps exactly."""
    for parent, name, bn in swapped:
        affine = getattr(parent, name)
        with torch.no_grad():
            bn.running_mean.zero_()
            bn.running_var.fill_(1.0 - bn.eps)  # then sqrt(var + eps) = 1
            bn.weight.copy_(affine.scale)
            bn.bias.copy_(affine.shift)
        setattr(parent, name, bn)


def dp_sgd_optimizer(parameters, *, multiplier: float, settings: AdaptSettings, batch: int,
                     privacy_seed: int | None = None, secure: bool = False):
    """Opacus's DPOptimizer (Adam inside) of the adaptation: noise std 2z·C on the sum of per-image gradients
    clipped to C, i.e. multiplier z relative to the replace sensitivity 2C."""
    from opacus.optimizers import DPOptimizer

    generator = None if privacy_seed is None or secure else torch.Generator().manual_seed(privacy_seed + 1)
    return DPOptimizer(torch.optim.Adam(parameters, lr=settings.adapt_lr), noise_multiplier=2.0 * multiplier,
                       max_grad_norm=settings.adapt_clip, expected_batch_size=batch, loss_reduction="mean",
                       generator=generator, secure_mode=secure)


def adapt_decoder(model, images: np.ndarray, *, multiplier: float, settings: AdaptSettings, adjacency: str,
                  noise, privacy_seed: int | None = None, secure: bool = False, seed: int = 0,
                  progress: bool = True):
    """A copy of autoencoder ``model`` whose decoder was fine-tuned by DP-SGD (Opacus) on the private ``images``
    (n, C, H, W) in [0, 1], and the ledger event of what it released. ``multiplier``: z relative to the
    replace sensitivity 2C (Opacus's is 2z); ``noise``: the run's privacy NoiseSource (it draws the batches);
    the gradient noise is Opacus's, seeded by ``privacy_seed`` when one is typed, from a CSPRNG with ``secure``.
    Returns (adapted model, MechanismEvent, Opacus accountant of the steps taken)."""
    from opacus import GradSampleModule
    from opacus.accountants import RDPAccountant
    from tqdm.auto import tqdm

    from .adversarial import _lowpass

    adapted = copy.deepcopy(model).eval()
    encoder = adapted.encoder.requires_grad_(False)
    decoder = adapted.decoder
    swapped = _unfold(decoder)
    n = len(images)
    batch = min(settings.adapt_batch_size, n)
    poisson = adjacency == "zero-out" and batch < n
    gsm = GradSampleModule(decoder, batch_first=True, loss_reduction="mean")
    gsm.train()
    optimizer = dp_sgd_optimizer(gsm.parameters(), multiplier=multiplier, settings=settings, batch=batch,
                                 privacy_seed=privacy_seed, secure=secure)
    accountant = RDPAccountant()  # Opacus's own account of its steps (add/remove, Poisson): for cross-checks
    optimizer.attach_step_hook(accountant.get_optimizer_hook_fn(sample_rate=batch / n))
    public = torch.Generator().manual_seed(seed)
    x_all = torch.as_tensor(images, dtype=torch.float32)
    for _ in tqdm(range(settings.adapt_steps), desc="DP-SGD adaptation of the decoder", disable=not progress):
        idx = noise.poisson_subset(n, batch / n) if poisson else noise.subset_without_replacement(n, batch)
        x = x_all[idx]
        optimizer.zero_grad()
        if len(x) == 0:  # an empty Poisson batch: the step still adds its noise (and is accounted)
            x = x_all[:1] * 0
        with torch.no_grad():
            z = encoder(x)
        if hasattr(decoder, "noise_dim"):  # a sampling (GAN) decoder draws its detail from public noise
            fake = gsm(z, torch.randn(len(x), decoder.noise_dim, generator=public))
        else:  # a pixel-loss decoder is a function of the code alone
            fake = gsm(z)
        per_image = (2.0 * (_lowpass(fake) - _lowpass(x)).abs().flatten(1).mean(1)
                     + 10.0 * (encoder(fake) - z).square().sum(1))
        per_image.mean().backward()
        optimizer.step()
    gsm._close()
    _fold(swapped)
    adapted.decoder = decoder.eval()
    event = adaptation_event(multiplier=multiplier, settings=settings, dataset_size=n, adjacency=adjacency)
    return adapted, event, accountant
