"""The one source of privacy randomness: batch selection and the noise on private releases.

Every draw comes from one keyed stream, SHAKE-256 in counter mode (call i reads SHAKE-256(key || i), an extendable
output function keyed by a secret: a cryptographically secure generator, from Python's hashlib). The key is 32
bytes from the OS CSPRNG, or, where a privacy seed was typed (tests, a reproducible demo; privacy.json then says
that the noise is known to whoever knows the seed), a hash of that seed. No private path reads torch's or numpy's
generators (Mersenne Twister and friends: their state is recoverable from their outputs). Kept apart from the
simulator's own generator (initial particles, directions, diffusion, particle-side smoothing).
"""
from __future__ import annotations

import hashlib
import math
import os

import numpy as np
import torch

__all__ = ["NoiseSource"]

SECURE_CAVEAT = ("privacy noise drawn from a SHAKE-256 stream keyed by 32 bytes of the OS CSPRNG (os.urandom; "
                 "Box-Muller in float64), never from a typed seed; floating-point attacks on the Gaussian mechanism "
                 "(Mironov 2012) are not addressed, and runs are not reproducible from a seed")
#: what a DP-SGD stage's noise is, under secure_noise (Opacus samples it from a torch generator)
SECURE_DP_SGD_CAVEAT = ("DP-SGD gradient noise: Opacus's secure mode (each coordinate the mean of 4 Gaussian draws, "
                        "against floating-point attacks) from a torch generator seeded with 63 bits of the privacy "
                        "stream; torch's generator is not a CSPRNG, so this stage is not cryptographically "
                        "secure")


def _key_of(seed: int) -> bytes:
    """The stream's key for a typed privacy seed."""
    return hashlib.sha256(b"swflow privacy seed " + str(int(seed)).encode()).digest()


class NoiseSource:
    """Privacy noise and subsampling from a keyed SHAKE-256 stream (module docstring). ``seed``: a typed privacy seed
    (the noise is then reproducible, and known to whoever knows it); None: a key from ``os.urandom``. ``secure``: a
    typed seed never sets the key (the OS does), and a checkpoint never holds the stream's place."""

    def __init__(self, seed: int | None = None, *, secure: bool = False, seed_known: bool | None = None):
        self.secure = secure
        # a seed somebody typed makes the noise reproducible by whoever knows it (privacy.json says so)
        self.seed_known = (seed is not None and not secure) if seed_known is None else seed_known
        self._typed_seed = seed if self.seed_known else None
        self._seeded = seed is not None and not secure
        self._key = _key_of(seed) if self._seeded else os.urandom(32)
        self._calls = 0

    def _bytes(self, n: int) -> bytes:
        """The next ``n`` bytes of the stream: SHAKE-256(key || call number)."""
        block = hashlib.shake_256(self._key + self._calls.to_bytes(8, "little")).digest(n)
        self._calls += 1
        return block

    # Draws happen on the CPU so that a seed gives the same noise on every device.
    def _uniform(self, n: int) -> torch.Tensor:
        bits = np.frombuffer(self._bytes(8 * n), dtype=np.uint64) >> np.uint64(11)
        return torch.from_numpy((bits.astype(np.float64) + 0.5) * 2.0 ** -53)

    def uniform(self, n: int) -> torch.Tensor:
        """``n`` uniforms in (0, 1), float64, from this stream (random choices a privacy guarantee relies on)."""
        return self._uniform(n)

    def gaussian(self, shape: tuple[int, ...], std: float, *, device=None, dtype=torch.float32) -> torch.Tensor:
        """i.i.d. N(0, std²) of the given shape (Box-Muller in float64 on the stream's uniforms: each pair of uniforms
        gives two independent normals, r·cos φ and r·sin φ)."""
        n = math.prod(shape)
        pairs = (n + 1) // 2
        radius = torch.sqrt(-2.0 * torch.log(self._uniform(pairs)))
        angle = 2.0 * math.pi * self._uniform(pairs)
        z = torch.cat([radius * torch.cos(angle), radius * torch.sin(angle)])[:n]
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
        """A generator for a library that draws privacy noise itself (Opacus), seeded with 63 bits of this stream (so
        a typed privacy seed reproduces it). Never torch's global generator, which any code that calls
        ``torch.manual_seed`` replays. It is torch's generator, not a CSPRNG: privacy.json says so where it is used."""
        return torch.Generator().manual_seed(int.from_bytes(self._bytes(8), "little") >> 1)

    def directions(self, dim: int, count: int) -> torch.Tensor:
        """``count`` directions uniform on the sphere S^{dim-1}, shape (dim, count), float64, secret."""
        g = self.gaussian((dim, count), 1.0, dtype=torch.float64)
        return g / g.norm(dim=0, keepdim=True)

    def _below(self, n: int, count: int) -> np.ndarray:
        """``count`` independent integers uniform on {0, …, n − 1}: 64-bit words of the stream, those at or above
        the largest multiple of n below 2^64 rejected (so that every residue is equally likely), reduced mod n."""
        limit = np.uint64((1 << 64) - (1 << 64) % n) if (1 << 64) % n else None
        kept: list[np.ndarray] = []
        while sum(map(len, kept)) < count:
            words = np.frombuffer(self._bytes(8 * (count + 8)), dtype=np.uint64)
            kept.append(words if limit is None else words[words < limit])
        return np.concatenate(kept)[:count] % np.uint64(n)

    def subset_without_replacement(self, n: int, size: int) -> torch.Tensor:
        """A uniformly random subset of ``size`` indices out of ``n``, in a uniformly random order. A small subset
        draws indices until ``size`` are distinct (O(size) of the stream, where n uniforms cost a step a
        millisecond); a large one keeps the ``size`` smallest of n uniforms."""
        if not 0 <= size <= n:
            raise ValueError(f"cannot choose {size} of {n} records")
        if 4 * size > n:
            return torch.topk(self._uniform(n), size, largest=False, sorted=True).indices
        draws = self._below(n, 2 * size)
        while True:
            distinct, first = np.unique(draws, return_index=True)
            if len(distinct) >= size:  # in the order of their first draws, the first ``size``
                return torch.from_numpy(draws[np.sort(first)[:size]].astype(np.int64))
            draws = np.concatenate([draws, self._below(n, 2 * (size - len(distinct)))])

    def poisson_subset(self, n: int, rate: float) -> torch.Tensor:
        """Each index independently with probability ``rate``."""
        return torch.nonzero(self._uniform(n) < rate).flatten()

    def state_dict(self) -> dict:
        """The stream's place, where a typed seed makes it reproducible; never a secret key (a resumed run with a
        secret key draws its remaining noise from a fresh one: independent noise, the same guarantee)."""
        return {"secure": self.secure, "calls": self._calls if self._seeded else None, "seed_known": self.seed_known,
                "seed": self._typed_seed}

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
        if not self.secure and state.get("seed") is not None and state.get("calls") is not None:
            self._seeded, self._key = True, _key_of(state["seed"])  # the typed seed that drew the noise goes on
            self._calls = int(state["calls"])
        self.seed_known = bool(state.get("seed_known", self.seed_known))
        self._typed_seed = state.get("seed")
