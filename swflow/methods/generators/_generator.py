"""The generator network shared by the baselines: N(0, I) -> MLP (004 App. C.5) -> latent."""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Sequence

import torch
from torch import Tensor, nn

from ...simulate.rng import seeded
from ...simulate.simulator import Simulator, target_state

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


class TrainedGenerator(Simulator):
    """The generator baselines as simulators (:class:`swflow.simulate.simulator.Simulator`): the same loop, checkpoints
    and resume as the flows; one private update per step. A checkpoint holds the generator, the optimizer,
    the RNG, the ledger and the privacy-noise state, so a resumed run never re-spends or resets the budget.
    Subclasses set ``generator``, ``target``, ``config``, ``rng``, ``name`` and implement ``_step(optimizer)``."""

    kind = name = "generator"
    _optimizer: torch.optim.Optimizer | None = None

    def _step(self, optimizer: torch.optim.Optimizer) -> None:
        raise NotImplementedError

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        if self._optimizer is None:
            self._optimizer = torch.optim.Adam(self.generator.parameters(), lr=self.config.lr)
        return self._optimizer

    def setup(self) -> None:
        self.generator.train()

    def step_once(self) -> None:
        self._step(self.optimizer)
        self.step += 1

    def budget_label(self) -> str:
        cal = getattr(self.target, "calibration", None)
        return "(eps=inf)" if cal is None else f"(eps<={cal.epsilon:.2f}, delta={cal.spec.delta:.0e})"

    def state_dict(self) -> dict:
        return {"step": self.step, "generator": self.generator.state_dict(),
                "optimizer": self.optimizer.state_dict(), "rng": self.rng.get_state(),
                "target": self.target.state_dict(),
                "config": asdict(self.config)}

    def load_state_dict(self, state: dict) -> None:
        self.check_config(state["config"])
        self.step = state["step"] if "step" in state else state["steps_done"]  # checkpoints before the Simulator
        self.generator.load_state_dict(state["generator"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.rng.set_state(state["rng"])
        self.target.load_state_dict(target_state(state))

    def fit(self, *, progress: bool = True, checkpoint_path: str | Path | None = None, checkpoint_every: int = 100,
            callbacks: Sequence = ()):
        """Train to ``config.steps`` (continuing from ``checkpoint_path`` when it exists, saved every
        ``checkpoint_every`` steps; ``callbacks`` observe the run as a flow's do); returns self."""
        from ...simulate.callbacks import Checkpointer, ProgressBar

        saver = [Checkpointer(checkpoint_path, every=checkpoint_every)] if checkpoint_path else []
        bar = [ProgressBar(f"{self.name} {self.budget_label()}")] if progress else []
        self.callbacks = [*callbacks, *saver, *bar]
        self.simulate()
        self.generator.eval()
        return self

    def sample(self, n: int, *, seed: int = 0) -> Tensor:
        """n outputs from a fresh seeded noise draw (post-processing: no privacy cost)."""
        return self.generator.sample(n, seed=seed)
