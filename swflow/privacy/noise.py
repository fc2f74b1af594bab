"""The one source of privacy randomness: batch selection and the noise on private releases.

Kept apart from the simulator's own generator (initial particles, directions, diffusion,
particle-side smoothing) so that it can be swapped for a cryptographically secure source.
"""
from __future__ import annotations

import math
import os

import numpy as np
import torch

__all__ = ["NoiseSource"]

SECURE_CAVEAT = ("privacy noise drawn from the OS CSPRNG (os.urandom, Box-Muller in float64); "
                 "floating-point attacks on the Gaussian mechanism (Mironov 2012) are not addressed, "
                 "and runs are not reproducible from a seed")
#: what a DP-SGD stage's noise is, under secure_noise (Opacus samples it from a torch generator)
SECURE_DP_SGD_CAVEAT = ("DP-SGD gradient noise: Opacus's secure mode (each coordinate the mean of 4 Gaussian draws, "
                        "against floating-point attacks) from a torch generator seeded with 64 bits of OS entropy "
                        "(os.urandom); torch's generator is not a CSPRNG, so this stage is not cryptographically "
                        "secure")


class NoiseSource:
    """Privacy noise and subsampling. ``secure=True`` uses ``os.urandom`` instead of a seeded generator."""

    def __init__(self, seed: int | None = None, *, secure: bool = False, seed_known: bool | None = None):
        self.secure = secure
        # a seed somebody typed makes the noise reproducible by whoever knows it (privacy.json says so)
        self.seed_known = (seed is not None and not secure) if seed_known is None else seed_known
        self._typed_seed = seed if self.seed_known else None
        self._generator = None if secure else torch.Generator().manual_seed(
            seed if seed is not None else int.from_bytes(os.urandom(8), "little") >> 1)

    # Draws happen on the CPU so that a seed gives the same noise on every device.
    def _uniform(self, n: int) -> torch.Tensor:
        if self.secure:
            bits = np.frombuffer(os.urandom(8 * n), dtype=np.uint64) >> np.uint64(11)
            return torch.from_numpy((bits.astype(np.float64) + 0.5) * 2.0 ** -53)
        return torch.rand(n, generator=self._generator, dtype=torch.float64)

    def uniform(self, n: int) -> torch.Tensor:
        """``n`` uniforms in (0, 1), float64, from this stream (random choices a privacy guarantee relies on)."""
        return self._uniform(n)

    def gaussian(self, shape: tuple[int, ...], std: float, *, device=None, dtype=torch.float32) -> torch.Tensor:
        """i.i.d. N(0, std²) of the given shape."""
        n = math.prod(shape)
        if self.secure:
            u1, u2 = self._uniform(n), self._uniform(n)
            z = torch.sqrt(-2.0 * torch.log(u1)) * torch.cos(2.0 * math.pi * u2)
        else:
            z = torch.randn(n, generator=self._generator, dtype=torch.float64)
        return (std * z).reshape(shape).to(device=device, dtype=dtype)

    @staticmethod
    def discrete_gaussian(counts: torch.Tensor, std: float) -> torch.Tensor:
        """``counts`` (int64, any shape) plus discrete-Gaussian noise of scale ``std``, drawn by OpenDP's
        sampler (exact integer arithmetic from OpenDP's own CSPRNG: no floating-point attack surface,
        never reproducible from a seed)."""
        from .mechanisms import discrete_gaussian_measurement

        noisy = discrete_gaussian_measurement(std)([int(c) for c in counts.flatten().tolist()])
        return torch.tensor(noisy, dtype=torch.int64).reshape(counts.shape)

    def torch_generator(self) -> torch.Generator:
        """A generator for a library that draws privacy noise itself (Opacus): seeded from this stream (so a typed
        privacy seed reproduces it), or with 64 bits of OS entropy under ``secure``. Never torch's global
        generator, which any code that calls ``torch.manual_seed`` replays."""
        if self.secure:
            seed = int.from_bytes(os.urandom(8), "little") >> 1
        else:
            seed = int(torch.randint(0, 2 ** 62, (1,), generator=self._generator))
        return torch.Generator().manual_seed(seed)

    def directions(self, dim: int, count: int) -> torch.Tensor:
        """``count`` directions uniform on the sphere S^{dim-1}, shape (dim, count), float64, secret."""
        g = self.gaussian((dim, count), 1.0, dtype=torch.float64)
        return g / g.norm(dim=0, keepdim=True)

    def subset_without_replacement(self, n: int, size: int) -> torch.Tensor:
        """A uniformly random subset of ``size`` indices out of ``n``."""
        if self.secure:
            return torch.argsort(self._uniform(n))[:size]
        return torch.randperm(n, generator=self._generator)[:size]

    def poisson_subset(self, n: int, rate: float) -> torch.Tensor:
        """Each index independently with probability ``rate``."""
        return torch.nonzero(self._uniform(n) < rate).flatten()

    def state_dict(self) -> dict:
        return {"secure": self.secure, "generator": None if self.secure else self._generator.get_state(),
                "seed_known": self.seed_known, "seed": self._typed_seed}

    def load_state_dict(self, state: dict) -> None:
        """Continue the checkpoint's stream. Whether its seed is known is the run's that drew the noise;
        a typed seed other than the run's is refused (the noise would not be that seed's)."""
        if state["secure"] != self.secure:
            raise ValueError("checkpoint and run disagree on secure_noise")
        if self._typed_seed is not None and state.get("seed") != self._typed_seed:
            drawn = f"--privacy-seed {state['seed']}" if state.get("seed") is not None else "a secret seed"
            raise ValueError(f"cannot resume: the run's privacy noise comes from {drawn}, not --privacy-seed "
                             f"{self._typed_seed}; resume without --privacy-seed (the checkpoint carries the noise "
                             "state) or with the run's own")
        if not self.secure:
            self._generator.set_state(state["generator"])
        self.seed_known = bool(state.get("seed_known", self.seed_known))
        self._typed_seed = state.get("seed")
