"""The generator network shared by the baselines: N(0, I) -> MLP (004 App. C.5) -> latent."""
from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["MLPGenerator"]


def _mlp(noise_dim: int, dim: int) -> nn.Module:
    """004 App. C.5: Linear 256, ReLU; Linear 512, BatchNorm, ReLU; Linear 256, ReLU; Linear to d."""
    return nn.Sequential(nn.Linear(noise_dim, 256), nn.ReLU(),
                         nn.Linear(256, 512), nn.BatchNorm1d(512), nn.ReLU(),
                         nn.Linear(512, 256), nn.ReLU(),
                         nn.Linear(256, dim))


class MLPGenerator(nn.Module):
    """Maps N(0, I_noise_dim) to R^dim, projected onto the unit sphere when ``on_sphere``."""

    def __init__(self, dim: int, *, noise_dim: int, on_sphere: bool, seed: int, device: str):
        super().__init__()
        torch.manual_seed(seed)  # weight initialisation
        self.net = _mlp(noise_dim, dim).to(device)
        self.noise_dim, self.on_sphere, self.device = noise_dim, on_sphere, device
        self.init_kwargs = {"dim": dim, "noise_dim": noise_dim, "on_sphere": on_sphere, "seed": seed}

    def forward(self, n: int, generator: torch.Generator) -> Tensor:
        x = self.net(torch.randn(n, self.noise_dim, generator=generator, device=self.device))
        return nn.functional.normalize(x, dim=1) if self.on_sphere else x

    @torch.no_grad()
    def sample(self, n: int, *, seed: int = 0) -> Tensor:
        """n outputs from a fresh seeded noise draw (post-processing: no privacy cost)."""
        self.eval()
        return self(n, torch.Generator(device=self.device).manual_seed(seed))
