"""Autoencoder architectures of 004 App. C.2 (and a small one for 8×8 digits).

Every encoder ends with a linear bottleneck whose output is normalised onto the unit sphere, so
private latents have norm exactly R = 1, which the privacy package relies on.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

__all__ = ["ARCHITECTURES", "NoisyDecoder", "SphereAutoencoder", "build"]


class _Normalize(nn.Module):
    def forward(self, z: Tensor) -> Tensor:
        return nn.functional.normalize(z, dim=1)


class SphereAutoencoder(nn.Module):
    """encoder: images (n, C, H, W) -> latents (n, latent) on the unit sphere; decoder: back to [0, 1]."""

    def __init__(self, encoder: nn.Module, decoder: nn.Module, *, image_shape: tuple[int, int, int], latent: int):
        super().__init__()
        self.encoder = nn.Sequential(encoder, _Normalize())
        self.decoder = decoder
        self.image_shape = image_shape
        self.latent = latent

    def forward(self, x: Tensor) -> Tensor:
        return self.decoder(self.encoder(x))

    def decode(self, z: Tensor) -> Tensor:
        """Images of latents (n, latent) -> (n, C, H, W).

        The decoder only ever saw unit-norm latents, so a point off the sphere (a particle that a
        noisy flow left at norm 2) is decoded at its nearest point on the sphere, z/‖z‖. This is
        post-processing of the particles: no privacy cost, and the particles themselves are kept.
        """
        return self.decoder(nn.functional.normalize(z, dim=1))

    @torch.no_grad()
    def encode_images(self, images: np.ndarray, *, batch_size: int = 1024) -> np.ndarray:
        """Latents (n, latent) on the unit sphere of images (n, C, H, W) in [0, 1]: batched, no gradients."""
        return torch.cat([self.encoder(torch.as_tensor(images[i:i + batch_size]))
                          for i in range(0, len(images), batch_size)]).numpy()

    @torch.no_grad()
    def decode_images(self, latents: np.ndarray, *, seed: int | None = None) -> np.ndarray:
        """Images (n, C, H, W) of latents (n, latent), decoded on the sphere (see :meth:`decode`). ``seed``: a
        sampling decoder's noise drawn from a generator seeded with it (the same images on every call), instead of
        the decoder's own running stream."""
        z = torch.as_tensor(latents)
        if seed is not None and isinstance(self.decoder, NoisyDecoder):
            noise = torch.randn(len(z), self.decoder.noise_dim, generator=torch.Generator().manual_seed(seed))
            return self.decoder(nn.functional.normalize(z, dim=1), noise.to(device=z.device, dtype=z.dtype)).numpy()
        return self.decode(z).numpy()


def upsampling_stages(size: int) -> int:
    """Doublings from a 4×4 map to ``size``×``size`` (a power of two, at least 8)."""
    stages = size.bit_length() - 3
    if size < 8 or size != 4 << stages:
        raise ValueError(f"image side {size} is not a power of two >= 8")
    return stages


class NoisyDecoder(nn.Module):
    """Images (n, C, size, size) in [0, 1] from codes (n, latent) and noise (n, noise_dim).

    From a 4×4 map of 4·width channels, each stage doubles the side and halves the channels
    (size 32: three stages, size 8: one). Without ``noise`` it draws it from its own generator
    (seed ``noise_seed``), so decoding the same particles twice in one process gives different but
    equally distributed images, and a fresh process decoding the same call sequence gives the same
    images."""

    def __init__(self, channels: int = 1, latent: int = 8, *, noise_dim: int = 16, width: int = 64,
                 size: int = 32, noise_seed: int = 0):
        super().__init__()
        self.noise_dim, self.noise_seed = noise_dim, noise_seed
        self._generators: dict[torch.device, torch.Generator] = {}
        c = 4 * width
        layers: list[nn.Module] = [nn.Linear(latent + noise_dim, c * 4 * 4), nn.Unflatten(1, (c, 4, 4)),
                                   nn.BatchNorm2d(c), nn.ReLU()]
        for _ in range(upsampling_stages(size)):
            layers += [nn.ConvTranspose2d(c, c // 2, 4, 2, 1), nn.BatchNorm2d(c // 2), nn.ReLU()]
            c //= 2
        self.net = nn.Sequential(*layers, nn.Conv2d(c, channels, 3, 1, 1), nn.Sigmoid())

    def draw_noise(self, n: int, device: torch.device) -> Tensor:
        if device not in self._generators:
            self._generators[device] = torch.Generator(device=device).manual_seed(self.noise_seed)
        return torch.randn(n, self.noise_dim, generator=self._generators[device], device=device)

    def forward(self, z: Tensor, noise: Tensor | None = None) -> Tensor:
        if noise is None:
            noise = self.draw_noise(len(z), z.device)
        return self.net(torch.cat([z, noise], dim=1))


def liutkus32(channels: int = 1, latent: int = 8) -> SphereAutoencoder:
    """The Liutkus et al. (2019) conv AE for 32×32 images (004 App. C.2; latent 8 for MNIST/F-MNIST)."""
    encoder = nn.Sequential(
        nn.Conv2d(channels, 3, 3, 1, 1), nn.ReLU(),
        nn.Conv2d(3, 32, 4, 2, 0), nn.ReLU(),          # 32 -> 15
        nn.Conv2d(32, 32, 3, 1, 1), nn.ReLU(),
        nn.Conv2d(32, 32, 3, 1, 1), nn.ReLU(),
        nn.Flatten(), nn.Linear(32 * 15 * 15, latent))
    decoder = nn.Sequential(
        nn.Linear(latent, 8192), nn.ReLU(), nn.Unflatten(1, (32, 16, 16)),
        nn.Conv2d(32, 32, 3, 1, 1), nn.ReLU(),
        nn.Conv2d(32, 32, 3, 1, 1), nn.ReLU(),
        nn.ConvTranspose2d(32, 32, 2, 2, 0), nn.ReLU(),  # 16 -> 32
        nn.Conv2d(32, channels, 3, 1, 1), nn.Sigmoid())
    return SphereAutoencoder(encoder, decoder, image_shape=(channels, 32, 32), latent=latent)


def dcgan64(channels: int = 3, latent: int = 48, width: int = 64) -> SphereAutoencoder:
    """DCGAN-style AE for 64×64 images (004 App. C.2; latent 48 for CelebA)."""
    w = width
    encoder = nn.Sequential(
        nn.Conv2d(channels, w, 3, 1, 1), nn.LeakyReLU(0.2),
        nn.Conv2d(w, 2 * w, 4, 2, 1), nn.LeakyReLU(0.2),        # 64 -> 32
        nn.Conv2d(2 * w, 4 * w, 4, 2, 1), nn.LeakyReLU(0.2),    # 32 -> 16
        nn.Conv2d(4 * w, 8 * w, 4, 2, 1), nn.LeakyReLU(0.2),    # 16 -> 8
        nn.Flatten(), nn.Linear(8 * w * 8 * 8, latent))
    decoder = nn.Sequential(
        nn.Unflatten(1, (latent, 1, 1)),
        nn.ConvTranspose2d(latent, 8 * w, 4, 1, 0), nn.LeakyReLU(0.2), nn.BatchNorm2d(8 * w),  # 1 -> 4
        nn.ConvTranspose2d(8 * w, 4 * w, 4, 2, 1), nn.LeakyReLU(0.2), nn.BatchNorm2d(4 * w),  # 4 -> 8
        nn.ConvTranspose2d(4 * w, 2 * w, 4, 2, 1), nn.LeakyReLU(0.2), nn.BatchNorm2d(2 * w),  # 8 -> 16
        nn.ConvTranspose2d(2 * w, w, 4, 2, 1), nn.LeakyReLU(0.2), nn.BatchNorm2d(w),          # 16 -> 32
        nn.ConvTranspose2d(w, channels, 4, 2, 1), nn.Sigmoid())                               # 32 -> 64
    return SphereAutoencoder(encoder, decoder, image_shape=(channels, 64, 64), latent=latent)


def digits8(channels: int = 1, latent: int = 8) -> SphereAutoencoder:
    """A small conv AE for scikit-learn's 8×8 digits."""
    encoder = nn.Sequential(
        nn.Conv2d(channels, 16, 3, 1, 1), nn.ReLU(),
        nn.Conv2d(16, 32, 4, 2, 1), nn.ReLU(),   # 8 -> 4
        nn.Flatten(), nn.Linear(32 * 4 * 4, latent))
    decoder = nn.Sequential(
        nn.Linear(latent, 32 * 4 * 4), nn.ReLU(), nn.Unflatten(1, (32, 4, 4)),
        nn.ConvTranspose2d(32, 16, 2, 2, 0), nn.ReLU(),  # 4 -> 8
        nn.Conv2d(16, channels, 3, 1, 1), nn.Sigmoid())
    return SphereAutoencoder(encoder, decoder, image_shape=(channels, 8, 8), latent=latent)


ARCHITECTURES = {"liutkus32": liutkus32, "dcgan64": dcgan64, "digits8": digits8}


def build(architecture: str, *, channels: int, latent: int, decoder: dict | None = None) -> SphereAutoencoder:
    """The module tree of ``architecture``; ``BASE-adv`` is BASE's encoder with a :class:`NoisyDecoder`
    whose ``noise_dim`` and ``width`` come from ``decoder`` (a checkpoint's metadata)."""
    base = architecture.removesuffix("-adv")
    if base not in ARCHITECTURES or (base != architecture and not decoder):
        raise ValueError(f"unknown architecture {architecture!r}; choose one of {sorted(ARCHITECTURES)} "
                         "(or NAME-adv with its decoder settings)")
    model = ARCHITECTURES[base](channels=channels, latent=latent)
    if base != architecture:
        model.decoder = NoisyDecoder(channels, latent, noise_dim=decoder["noise_dim"], width=decoder["width"],
                                     size=model.image_shape[-1])
    return model
