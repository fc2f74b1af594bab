"""A sharper decoder for a trained sphere encoder: a conditional GAN on the public split.

Why: an 8-dimensional code cannot hold a Fashion-MNIST image, so a decoder trained on pixel loss
returns the *mean* of the images that share a code, which is blurry; FID reads blur as distance.
Here the encoder is kept (frozen: private latents and every flow result stay the same) and a new
decoder G(z, u) learns to *sample* an image given the code z, with public noise u ~ N(0, I):

    critic    D(x, z) = w·φ(x) + ⟨V z, φ(x)⟩        projection critic, spectral norm, hinge loss
    decoder   loss = −D(G(z, u), z) + λ_code ‖E(G(z, u)) − z‖² + λ_low ‖pool(G(z, u)) − pool(x)‖₁

The code term (through the frozen encoder E) and the 4× average-pooled L1 tie each sample to its
code without asking for the pixel mean. u is drawn from the decoder's own seeded generator at
decode time: public randomness applied to the released particles, i.e. post-processing.

The published decoder is an exponential moving average of the trained one's weights (GAN iterates
oscillate around a better point; averaging them is a cheap, well-known FID gain), with its
BatchNorm statistics recomputed on public codes. A run may start its decoder from another
checkpoint's (``init_from``, same encoder) to extend a finished training: the critic then starts
afresh and gets ``critic_warmup`` updates of its own before the decoder moves.

Training reads ``images[split.public]`` only, like :func:`~autoencoders.train.train_autoencoder`,
and resumes from ``NAME.partial.pt``.
"""
from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn.utils.parametrizations import spectral_norm
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn, update_bn
from tqdm.auto import tqdm

from swflow.simulate.rng import keeps_global_rng

from .models import NoisyDecoder, SphereAutoencoder, upsampling_stages

__all__ = ["AdversarialConfig", "ProjectionCritic", "train_adversarial_decoder"]


class ProjectionCritic(nn.Module):
    """D(x, z) (n,) for images (n, C, size, size) and codes (n, latent); spectrally normalised unless
    ``spectral`` is off (Opacus cannot take per-sample gradients through the normalisation's power iteration;
    the DP critic of autoencoders/adapt.py is bounded by its gradient clipping instead).

    Mirrors :class:`NoisyDecoder`: strided convolutions halve the side down to 4×4, ending at
    4·width channels."""

    def __init__(self, channels: int = 1, latent: int = 8, *, width: int = 64, size: int = 32, spectral: bool = True):
        super().__init__()
        norm = spectral_norm if spectral else (lambda layer: layer)
        stages = upsampling_stages(size)
        layers: list[nn.Module] = []
        c_in = channels
        for i in range(stages):
            c_out = 4 * width >> (stages - 1 - i)
            layers += [norm(nn.Conv2d(c_in, c_out, 4, 2, 1)), nn.LeakyReLU(0.2)]
            c_in = c_out
        self.features = nn.Sequential(*layers, nn.Flatten(), norm(nn.Linear(4 * width * 16, 4 * width)),
                                      nn.LeakyReLU(0.2))
        self.score = norm(nn.Linear(4 * width, 1))
        self.embed = norm(nn.Linear(latent, 4 * width, bias=False))

    def forward(self, x: Tensor, z: Tensor) -> Tensor:
        h = self.features(2 * x - 1)
        return self.score(h).squeeze(1) + (self.embed(z) * h).sum(dim=1)


@dataclass(frozen=True)
class AdversarialConfig:
    steps: int = 6000
    batch_size: int = 64
    lr: float = 2e-4
    code_weight: float = 10.0
    lowpass_weight: float = 2.0
    noise_dim: int = 16
    width: int = 64
    val_size: int = 1000
    eval_every: int = 250
    seed: int = 0
    ema_decay: float = 0.999
    init_from: str | None = None  # checkpoint whose decoder this run starts from
    critic_warmup: int = 0  # critic-only updates first: a fresh critic for a warm-started decoder
    # DiffAugment (translation, cutout) on everything the critic sees. Off: warm-started from fashion-mnist-adv2 for
    # 7 000 more steps with it, the public split decoded scored FID@10k 31.7 against adv2's 14.1 (2026-11-24)
    augment: bool = False


def _lowpass(x: Tensor) -> Tensor:
    return nn.functional.avg_pool2d(x, 4)


def augment(x: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """Differentiable augmentation of what the critic sees (Zhao et al. 2020, DiffAugment's 'translation,
    cutout'): each image shifted by up to 1/8 of its side (zero fill) and a square of half its side blanked.
    Applied alike to real and generated images, it keeps the critic from memorising the public images, so
    the decoder keeps learning (the same gradient flows through the augmentation to the decoder)."""
    n, _, h, w = x.shape
    shift = max(1, h // 8)
    dy, dx = (torch.randint(-shift, shift + 1, (2, n), generator=generator)).tolist()
    padded = nn.functional.pad(x, (shift, shift, shift, shift))
    rows = torch.stack([padded[i, :, shift + dy[i]:shift + dy[i] + h, shift + dx[i]:shift + dx[i] + w]
                        for i in range(n)])
    size = h // 2
    cy, cx = (torch.randint(0, h - size + 1, (2, n), generator=generator))
    mask = torch.ones(n, 1, h, w, dtype=x.dtype)
    for i in range(n):
        mask[i, :, cy[i]:cy[i] + size, cx[i]:cx[i] + size] = 0
    return rows * mask.to(x.device)


@torch.no_grad()
def _averaged_decoder(ema: AveragedModel, encoder: nn.Module, train: Tensor, batch_size: int) -> NoisyDecoder:
    """The averaged decoder in eval mode, its BatchNorm statistics recomputed on up to 64 batches of
    public codes (the running statistics of the live decoder belong to other weights)."""
    codes = [encoder(train[i:i + batch_size]) for i in range(0, min(len(train), 64 * batch_size), batch_size)]
    update_bn(codes, ema)
    return ema.module.eval()


@torch.no_grad()
def _validate(encoder: nn.Module, decoder: NoisyDecoder, val: Tensor) -> dict:
    """Held-out public rows: code error ‖E(G(E(x), u)) − E(x)‖² and 4×-pooled L1 to x."""
    z = encoder(val)
    fake = decoder(z, torch.randn(len(z), decoder.noise_dim, generator=torch.Generator().manual_seed(1)))
    return {"code_error": float(((encoder(fake) - z) ** 2).sum(1).mean()),
            "lowpass_l1": float((_lowpass(fake) - _lowpass(val)).abs().mean())}


class _ConditionalGan:
    """Decoder, critic and their optimisers; :meth:`step` is one hinge-loss update of each."""

    def __init__(self, encoder: nn.Module, image_shape: tuple[int, int, int], latent: int, config: AdversarialConfig):
        self.encoder, self.config = encoder, config
        channels, size = image_shape[0], image_shape[-1]
        self.decoder = NoisyDecoder(channels, latent, noise_dim=config.noise_dim, width=config.width, size=size)
        self.critic = ProjectionCritic(channels, latent, width=config.width, size=size)
        self.opt_g = torch.optim.Adam(self.decoder.parameters(), lr=config.lr, betas=(0.0, 0.9))
        self.opt_d = torch.optim.Adam(self.critic.parameters(), lr=config.lr, betas=(0.0, 0.9))
        self.ema = AveragedModel(self.decoder, multi_avg_fn=get_ema_multi_avg_fn(config.ema_decay))

    def step(self, x: Tensor, *, update_decoder: bool = True) -> float:
        """One critic update and (unless told not to) one decoder update on public images x (b, C, H, W);
        returns the critic loss."""
        cfg = self.config
        look = augment if cfg.augment else (lambda images: images)
        z = self.encoder(x)
        fake = self.decoder(z, torch.randn(len(z), cfg.noise_dim))
        d_loss = (torch.relu(1 - self.critic(look(x), z)).mean()
                  + torch.relu(1 + self.critic(look(fake.detach()), z)).mean())
        self.opt_d.zero_grad()
        d_loss.backward()
        self.opt_d.step()
        if not update_decoder:
            return d_loss.item()
        code = ((self.encoder(fake) - z) ** 2).sum(1).mean()
        g_loss = (-self.critic(look(fake), z).mean() + cfg.code_weight * code
                  + cfg.lowpass_weight * (_lowpass(fake) - _lowpass(x)).abs().mean())
        self.opt_g.zero_grad()
        g_loss.backward()
        self.opt_g.step()
        self.ema.update_parameters(self.decoder)
        return d_loss.item()

    PARTS = ("decoder", "critic", "opt_g", "opt_d", "ema")

    def state_dict(self) -> dict:
        return {part: getattr(self, part).state_dict() for part in self.PARTS}

    def load_state_dict(self, state: dict) -> None:
        for part in self.PARTS:
            getattr(self, part).load_state_dict(state[part])


def _warm_start(gan: _ConditionalGan, init_from: str, base_meta: dict) -> dict:
    """Copy checkpoint ``init_from``'s decoder into ``gan`` (decoder and its average); its metadata."""
    from .train import load_autoencoder

    model, meta = load_autoencoder(init_from)
    if meta.get("encoder_from", {}).get("weights_sha256") != base_meta["weights_sha256"]:
        raise ValueError(f"{init_from} decodes another encoder's codes; start from a decoder trained on "
                         f"{base_meta['name']}'s encoder")
    if not isinstance(model.decoder, NoisyDecoder) or meta["decoder"]["noise_dim"] != gan.config.noise_dim or \
            meta["decoder"]["width"] != gan.config.width:
        raise ValueError(f"{init_from}'s decoder is not a NoisyDecoder of this noise_dim and width")
    gan.decoder.load_state_dict(model.decoder.state_dict())
    gan.ema.module.load_state_dict(model.decoder.state_dict())
    return meta


def _restore(partial: Path, gan: _ConditionalGan, config: AdversarialConfig, base_sha256: str) -> dict:
    """Load an interrupted run's state into ``gan``; the training state, or a fresh one."""
    if not partial.exists():
        return {"step": 0, "history": []}
    from swflow.io.hdf5 import load_tensors

    saved = load_tensors(partial, what="decoder training checkpoint")
    # only the length may change: a run can be extended, or finished early from its last save
    settings = lambda c: {k: v for k, v in c.items() if k != "steps"}  # noqa: E731
    if settings(saved["config"]) != settings(asdict(config)) or saved["base_sha256"] != base_sha256:
        raise ValueError(f"{partial} was written with other settings or another base; delete it to restart")
    gan.load_state_dict(saved["gan"])
    torch.set_rng_state(saved["torch_rng"])
    return saved["state"]


@keeps_global_rng
def train_adversarial_decoder(name: str, base: SphereAutoencoder, base_meta: dict, images: np.ndarray, split, *,
                              config: AdversarialConfig, out_dir: Path, progress: bool = True,
                              rows: np.ndarray | None = None) -> dict:
    """Fit G(z, u) against ``base``'s frozen encoder on ``images[split.public]`` (or ``rows`` of it: the part its
    encoder was trained on); write ``out_dir/name.pt`` (encoder + new decoder, architecture ``BASE-adv``) and
    ``name.json``; return the metadata."""
    from .train import public_part, publish_checkpoint, training_cost

    if split.manifest() != base_meta["split"]:
        raise ValueError(f"the split does not match the one {base_meta['name']} was trained with")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    public = images[public_part(split, rows)]  # the only rows this function touches
    torch.manual_seed(config.seed)
    order = np.random.default_rng(config.seed).permutation(len(public))
    n_val = min(config.val_size, len(public) // 10)  # small public splits (digits: 898 rows) keep 90% to train
    val = torch.from_numpy(public[order[:n_val]])
    train = torch.from_numpy(public[order[n_val:]])
    encoder = base.encoder.eval().requires_grad_(False)
    gan = _ConditionalGan(encoder, base.image_shape, base.latent, config)
    init_meta = _warm_start(gan, config.init_from, base_meta) if config.init_from else None
    partial = out_dir / f"{name}.partial.pt"
    state = _restore(partial, gan, config, base_meta["weights_sha256"])
    bar = tqdm(total=config.steps, initial=state["step"], disable=not progress, desc=f"{name} decoder")
    started = time.perf_counter() - state.get("seconds", 0.0)  # wall time summed over resumed sessions
    while state["step"] < config.steps:
        critic_loss = gan.step(train[torch.randint(len(train), (config.batch_size,))],
                               update_decoder=state["step"] >= config.critic_warmup)
        state["step"] += 1
        bar.update()
        if state["step"] % config.eval_every == 0 or state["step"] == config.steps:
            averaged = _averaged_decoder(gan.ema, encoder, train, config.batch_size)
            row = {"step": state["step"], "critic_loss": critic_loss, **_validate(encoder, averaged, val)}
            state["history"].append(row)
            state["seconds"] = time.perf_counter() - started
            bar.set_postfix(code=f"{row['code_error']:.3f}", l1=f"{row['lowpass_l1']:.3f}", refresh=False)
            tmp = partial.with_suffix(".tmp")
            torch.save({"gan": gan.state_dict(), "state": state, "config": asdict(config),
                        "base_sha256": base_meta["weights_sha256"], "torch_rng": torch.get_rng_state()}, tmp)
            os.replace(tmp, partial)
    bar.close()
    decoder = _averaged_decoder(gan.ema, encoder, train, config.batch_size)
    model = SphereAutoencoder(base.encoder[0], decoder, image_shape=base.image_shape, latent=base.latent)
    meta = {**{k: base_meta[k] for k in ("dataset", "channels", "image_shape", "latent", "latent_norm", "split",
                                         "source", "excluded_classes") if k in base_meta},
            "name": name, "architecture": f"{base_meta['architecture']}-adv", "trained_on": "public split only",
            "encoder_from": {"name": base_meta["name"], "weights_sha256": base_meta["weights_sha256"],
                             **({"cost": base_meta["cost"]} if "cost" in base_meta else {})},
            "decoder": {"kind": "conditional GAN, noise input, averaged weights", "noise_dim": config.noise_dim,
                        "width": config.width},
            **({"decoder_init_from": {"name": init_meta["name"], "weights_sha256": init_meta["weights_sha256"]}}
               if init_meta else {}),
            "train_config": asdict(config), "steps_run": state["step"], "validation_curve": state["history"],
            "cost": training_cost(started, "wall time summed over sessions; steps from a warm start are not included")}
    meta = publish_checkpoint(model, meta, out_dir / f"{name}.pt")
    partial.unlink(missing_ok=True)
    return meta
