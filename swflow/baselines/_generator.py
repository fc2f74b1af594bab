"""The generator network shared by the baselines: N(0, I) -> MLP (004 App. C.5) -> latent."""
from __future__ import annotations

import torch
from torch import Tensor, nn

from ..rng import seeded

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
        with seeded(seed):  # the weight initialisation
            self.net = _mlp(noise_dim, dim).to(device)
        self.noise_dim, self.on_sphere, self.device = noise_dim, on_sphere, device
        self.init_kwargs = {"dim": dim, "noise_dim": noise_dim, "on_sphere": on_sphere, "seed": seed}

    def draw(self, n: int, generator: torch.Generator) -> Tensor:
        """n inputs u ~ N(0, I_noise_dim)."""
        return torch.randn(n, self.noise_dim, generator=generator, device=self.device)

    def map(self, u: Tensor) -> Tensor:
        """The outputs for inputs ``u`` (n, noise_dim)."""
        x = self.net(u)
        return nn.functional.normalize(x, dim=1) if self.on_sphere else x

    def forward(self, n: int, generator: torch.Generator) -> Tensor:
        return self.map(self.draw(n, generator))

    @torch.no_grad()
    def sample(self, n: int, *, seed: int = 0) -> Tensor:
        """n outputs from a fresh seeded noise draw (post-processing: no privacy cost)."""
        self.eval()
        return self(n, torch.Generator(device=self.device).manual_seed(seed))


class TrainedGenerator:
    """The one training loop of the generator baselines: resume, one private update per step, atomic
    checkpoints (generator, optimizer, RNG, ledger and privacy-noise state, so a resumed run never
    re-spends or resets the budget). Subclasses set ``generator``, ``target``, ``config``, ``rng``,
    ``name`` and implement ``_step(optimizer)``."""

    name = "generator"
    steps_done = 0

    def _step(self, optimizer: torch.optim.Optimizer) -> None:
        raise NotImplementedError

    def state_dict(self, optimizer: torch.optim.Optimizer) -> dict:
        from dataclasses import asdict

        return {"steps_done": self.steps_done, "generator": self.generator.state_dict(),
                "optimizer": optimizer.state_dict(), "rng": self.rng.get_state(),
                "ledger": self.target.ledger.state_dict(), "privacy_noise": self.target.noise_state(),
                "config": asdict(self.config)}

    def load_state_dict(self, state: dict, optimizer: torch.optim.Optimizer) -> None:
        from dataclasses import asdict

        if state["config"] != asdict(self.config):
            raise ValueError("checkpoint was written with a different generator configuration")
        self.steps_done = state["steps_done"]
        self.generator.load_state_dict(state["generator"])
        optimizer.load_state_dict(state["optimizer"])
        self.rng.set_state(state["rng"])
        self.target.load_state(ledger=state["ledger"], noise=state["privacy_noise"])

    def fit(self, *, progress: bool = True, checkpoint_path: str | None = None, checkpoint_every: int = 100):
        import os
        from pathlib import Path

        from tqdm.auto import tqdm

        optimizer = torch.optim.Adam(self.generator.parameters(), lr=self.config.lr)
        path = Path(checkpoint_path) if checkpoint_path else None
        if path is not None and path.exists():
            from ..io import load_tensors

            self.load_state_dict(load_tensors(path, what="generator checkpoint"), optimizer)
        self.generator.train()
        for _ in tqdm(range(self.steps_done, self.config.steps), disable=not progress, desc=self.name):
            self._step(optimizer)
            self.steps_done += 1
            if path is not None and checkpoint_every and self.steps_done % checkpoint_every == 0:
                tmp = path.with_suffix(".tmp")
                torch.save(self.state_dict(optimizer), tmp)
                os.replace(tmp, path)  # atomic
        self.generator.eval()
        return self

    def sample(self, n: int, *, seed: int = 0) -> Tensor:
        """n outputs from a fresh seeded noise draw (post-processing: no privacy cost)."""
        return self.generator.sample(n, seed=seed)
