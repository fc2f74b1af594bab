"""DP adaptation of a public decoder to the private images, by DP-SGD through Opacus, in the run's budget.

With a frozen public decoder the flow can only move within what the decoder can draw. When the private
images show what the public ones never did (classes left out of the public data), the decoder learns them
under one of two objectives (``adapt_objective``); either way Opacus computes each private image's
gradient, clips it to norm C and adds Gaussian noise to the batch's sum, every step:

``pixel`` (default)  DP-SGD on the decoder itself; per image, the 4×-pooled L1 between G(E(x), u) and x
    and the code term λ_code ‖E(G(E(x), u)) − E(x)‖² (the public training's loss without its critic). It
    moves the decoder's coarse structure toward the private images and keeps the detail it learned.
``critic``  DP-SGD on a fresh critic of the private images, the decoder learning against it the way it
    learned the public images (autoencoders/adversarial.py):

        critic    per private image i: ℓ_i = relu(1 − D(x_i, E(x_i))) + relu(1 + D(G(c_i, u_i), c_i)), the
                  gradient of ℓ_i clipped to C
        decoder   loss = −D(G(c, u), c) + λ_code ‖E(G(c, u)) − c‖²

    with c drawn from the codes the run released (the flow's particles) and u public noise: the decoder
    reads the critic (a DP-SGD release) and released codes only, so its updates are post-processing. The
    critic is a :class:`~autoencoders.adversarial.ProjectionCritic` without spectral normalisation
    (Opacus cannot take per-sample gradients through its power iteration); the published decoder is the
    moving average of the trained one's weights.

Why pixel is the default (docs/unseen.md, measured on a public stand-in): without noise the critic is the
better teacher (a sampling decoder that never saw footwear: FID 103.8 frozen, 66.3 after 1 000 critic steps,
where the pooled L1 blurs it toward the mean), but at the noise of ε ≈ 9 on 4 500 images its updates follow
the noise (164.3 after 600 steps): the critic's ~430 000 parameters carry noise of norm ~2z·C·√P a step.

Privacy. One image's loss enters a step's sum through its gradient clipped to norm C; replacing the image
(by any image, or by the null record, the zero image) moves the sum by at most 2C (the generated image the
critic pairs it with does not depend on which private image is held). The batch is drawn by the
privacy noise source (fixed size without replacement under replace-one, Poisson under zero-out), so a step
is a sampled Gaussian mechanism of multiplier z = σ / 2C (Opacus's noise multiplier σ / C is 2z). The
budget is split by a public setting (``adapt_share``): the histogram release is calibrated alone to
(1 − share)·ε, then the DP-SGD multiplier is the smallest whose composition with it (dp-accounting, from the
ledger's events) stays within ε. The run's ledger holds both releases; the reported ε is their composition.

The adapted decoder saw private data: it is an output of the run (its directory), never a checkpoint
that claims public-only training, and its metadata says what it saw and under which (ε, δ).
"""
from __future__ import annotations

import copy
import math
import warnings
from contextlib import contextmanager
from dataclasses import replace

import numpy as np
import torch
from torch import Tensor, nn

from swflow.core.config import AdaptSettings, PrivacySpec
from swflow.privacy.ledger import ADAPT_BOUND, MechanismEvent
from .adversarial import AdversarialConfig, ProjectionCritic, _lowpass

__all__ = ["ADAPT_BOUND", "adaptation_event", "split_budget", "dp_sgd_optimizer", "adapt_decoder"]



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
    from swflow.privacy import calibrate, plan_events
    from swflow.privacy.accountants import epsilon_from_events

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


def dp_sgd_optimizer(parameters, *, multiplier: float, settings: AdaptSettings, batch: int, lr: float,
                     noise, betas: tuple[float, float] = (0.9, 0.999)):
    """Opacus's DPOptimizer (Adam inside) of the adaptation: noise std 2z·C on the sum of per-image gradients
    clipped to C, i.e. multiplier z relative to the replace sensitivity 2C. ``noise``: the run's privacy
    NoiseSource; Opacus draws from the generator it hands out (never torch's global one), in Opacus's secure mode
    when the source is secure."""
    from opacus.optimizers import DPOptimizer

    generator, secure = noise.torch_generator(), noise.secure
    adam = torch.optim.Adam(parameters, lr=lr, betas=betas)
    return DPOptimizer(adam, noise_multiplier=2.0 * multiplier, max_grad_norm=settings.adapt_clip,
                       expected_batch_size=batch, loss_reduction="mean", generator=generator, secure_mode=secure)


#: the critic objective's Adam betas, critic and decoder (a low first moment, as GAN training usually takes)
BETAS = (0.5, 0.9)
#: weights of the code term ‖E(G(c, u)) − c‖² and the 4×-pooled L1, those of the public decoder's training
CODE_WEIGHT = AdversarialConfig.code_weight
LOWPASS_WEIGHT = AdversarialConfig.lowpass_weight
#: decay of the published decoder's moving average (shorter than the public training's 0.999: hundreds of steps)
EMA_DECAY = 0.99


def _backward(loss: Tensor) -> None:
    """``loss.backward()`` without torch's notice that a full backward hook fires on a module whose inputs need no
    gradient: Opacus hooks every layer, and the first layer's input is an image or a code, which never needs one.
    The filter is scoped to this call; the caller's warning filters are restored on exit."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Full backward hook is firing", category=UserWarning)
        loss.backward()


def _sample(net, decoder: nn.Module, codes: Tensor, public: torch.Generator) -> Tensor:
    """``net`` (the decoder, or Opacus's wrapper of it) on ``codes``, with public noise when ``decoder`` samples."""
    if hasattr(decoder, "noise_dim"):
        return net(codes, torch.randn(len(codes), decoder.noise_dim, generator=public))
    return net(codes)


class _PixelObjective:
    """DP-SGD on the decoder itself: per image, the 4×-pooled L1 between G(E(x), u) and x plus the code term."""

    def __init__(self, encoder, decoder, *, optimizer_for, public: torch.Generator, settings: AdaptSettings):
        from opacus import GradSampleModule

        self.encoder, self.decoder, self.public = encoder, decoder, public
        self.swapped = _unfold(decoder)  # Opacus refuses BatchNorm: its eval-mode affine map, folded back at the end
        self.grad_sampler = GradSampleModule(decoder, batch_first=True, loss_reduction="mean")
        self.grad_sampler.train()
        self.optimizer = optimizer_for(self.grad_sampler.parameters(), lr=settings.adapt_lr, betas=(0.9, 0.999))

    def step(self, x: Tensor, batch: int) -> None:
        self.optimizer.zero_grad()
        with torch.no_grad():
            z = self.encoder(x)
        fake = _sample(self.grad_sampler, self.decoder, z, self.public)
        per_image = (LOWPASS_WEIGHT * (_lowpass(fake) - _lowpass(x)).abs().flatten(1).mean(1)
                     + CODE_WEIGHT * (self.encoder(fake) - z).square().sum(1))
        _backward(per_image.mean())
        self.optimizer.step()

    def finish(self) -> nn.Module:
        self.grad_sampler._close()
        _fold(self.swapped)
        return self.decoder.eval()


class _CriticObjective:
    """DP-SGD on a fresh critic; the decoder learns against it from released codes only, and the published decoder
    is its moving average. A step's batch pairs private image i with generated image i; Opacus sums a layer's
    per-sample gradients over the two calls, so row i (private term i plus generated term i) is clipped to C as
    one. The generated image is drawn from released codes and public noise, the same whichever private image
    a neighbouring data set holds, so replacing one private image moves a step's sum by at most 2C."""

    def __init__(self, encoder, decoder, *, optimizer_for, public: torch.Generator, codes: Tensor, image_shape,
                 settings: AdaptSettings, seed: int):
        from opacus import GradSampleModule
        from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

        self.encoder, self.decoder, self.public, self.codes = encoder, decoder, public, codes
        with torch.random.fork_rng():  # the critic's initialisation: public randomness, seeded; torch's own untouched
            torch.manual_seed(seed)
            self.critic = ProjectionCritic(image_shape[0], codes.shape[1], width=settings.adapt_critic_width,
                                           size=image_shape[-1], spectral=False)
        self.grad_sampler = GradSampleModule(self.critic, batch_first=True, loss_reduction="mean")
        self.optimizer = optimizer_for(self.grad_sampler.parameters(), lr=settings.adapt_critic_lr, betas=BETAS)
        self.decoder_optimizer = torch.optim.Adam(decoder.parameters(), lr=settings.adapt_lr, betas=BETAS)
        self.average = AveragedModel(decoder, multi_avg_fn=get_ema_multi_avg_fn(EMA_DECAY))

    def _generate(self, k: int) -> tuple[Tensor, Tensor]:
        c = self.codes[torch.randint(len(self.codes), (k,), generator=self.public)]
        return c, _sample(self.decoder, self.decoder, c, self.public)

    def step(self, x: Tensor, batch: int) -> None:
        with torch.no_grad():
            fake_codes, fake = self._generate(len(x))
            real_codes = self.encoder(x)
        self.optimizer.zero_grad()
        _backward(torch.relu(1 - self.grad_sampler(x, real_codes)).mean()
                  + torch.relu(1 + self.grad_sampler(fake, fake_codes)).mean())
        self.optimizer.step()
        with _frozen(self.critic, self.grad_sampler):  # the decoder's step reads the critic, not the images
            c, fake = self._generate(batch)
            loss = -self.critic(fake, c).mean() + CODE_WEIGHT * (self.encoder(fake) - c).square().sum(1).mean()
            self.decoder_optimizer.zero_grad()
            loss.backward()
            self.decoder_optimizer.step()
        self.average.update_parameters(self.decoder)

    def finish(self) -> nn.Module:
        self.grad_sampler._close()
        return self.average.module.eval()


@contextmanager
def _frozen(module: nn.Module, grad_sampler):
    """The critic as a fixed function while the decoder learns through it: no gradients, no per-sample hooks."""
    trainable = [p for p in module.parameters() if p.requires_grad]
    grad_sampler.disable_hooks()
    for p in trainable:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p in trainable:
            p.requires_grad_(True)
        grad_sampler.enable_hooks()


def adapt_decoder(model, images: np.ndarray, codes: np.ndarray, *, multiplier: float, settings: AdaptSettings,
                  adjacency: str, noise, seed: int = 0, progress: bool = True):
    """A copy of autoencoder ``model`` whose decoder learned the private ``images`` (n, C, H, W) in [0, 1] by the
    objective ``settings.adapt_objective`` (module docstring), and the ledger event of what it released.
    ``codes`` (m, latent): the codes the run released (the critic objective's decoder draws from them);
    ``multiplier``: z relative to the replace sensitivity 2C (Opacus's is 2z); ``noise``: the run's privacy
    NoiseSource (it draws the batches, and seeds the generator Opacus draws the gradient noise from,
    :meth:`~swflow.privacy.noise.NoiseSource.torch_generator`); ``seed``: the public randomness (the decoder's
    noise, the critic's initialisation, the codes drawn). Returns (adapted model, MechanismEvent, Opacus accountant of the steps)."""
    from opacus.accountants import RDPAccountant
    from tqdm.auto import tqdm

    codes = torch.as_tensor(np.asarray(codes), dtype=torch.float32)
    if codes.ndim != 2 or codes.shape[1] != model.latent or len(codes) == 0:
        raise ValueError(f"codes must be (m, {model.latent}) released latents, got {tuple(codes.shape)}")
    adapted = copy.deepcopy(model).eval()  # eval: the decoder's BatchNorms keep their public statistics
    encoder = adapted.encoder.requires_grad_(False)
    n = len(images)
    batch = min(settings.adapt_batch_size, n)
    poisson = adjacency == "zero-out" and batch < n
    public = torch.Generator().manual_seed(seed)
    accountant = RDPAccountant()  # Opacus's own account of its steps (add/remove, Poisson): for cross-checks

    def optimizer_for(parameters, *, lr: float, betas: tuple[float, float]):
        optimizer = dp_sgd_optimizer(parameters, multiplier=multiplier, settings=settings, batch=batch, lr=lr,
                                     betas=betas, noise=noise)
        optimizer.attach_step_hook(accountant.get_optimizer_hook_fn(sample_rate=batch / n))
        return optimizer

    if settings.adapt_objective == "critic":
        objective = _CriticObjective(encoder, adapted.decoder, optimizer_for=optimizer_for, public=public, codes=codes,
                                     image_shape=model.image_shape, settings=settings, seed=seed)
    else:
        objective = _PixelObjective(encoder, adapted.decoder, optimizer_for=optimizer_for, public=public,
                                    settings=settings)
    x_all = torch.as_tensor(images, dtype=torch.float32)
    for _ in tqdm(range(settings.adapt_steps), desc=f"DP adaptation of the decoder ({settings.adapt_objective})",
                  disable=not progress):
        idx = noise.poisson_subset(n, batch / n) if poisson else noise.subset_without_replacement(n, batch)
        x = x_all[idx]
        if len(x) == 0:  # an empty Poisson batch: the step still adds its noise (and is accounted)
            x = x_all[:1] * 0
        objective.step(x, batch)
    adapted.decoder = objective.finish()
    event = adaptation_event(multiplier=multiplier, settings=settings, dataset_size=n, adjacency=adjacency)
    return adapted, event, accountant
