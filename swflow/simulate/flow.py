"""The Euler–Maruyama particle simulator and its projection strategies.

    X ← X + h · v̂(X) + sqrt(2λh) · Z

One loop serves every flow; methods differ only by the projection strategy they plug in:

* :class:`Resampled` (DPSWflow-r, 004 Alg. 1): fresh directions and a fresh private release
  every step — one accounted mechanism per step.
* :class:`Presampled` (DPSWflow, 004 Alg. 2): one pool of directions and ONE release of the
  noisy target projections before the loop; each step subsamples directions from the pool and
  spends no privacy.

σ = 0 (a non-private target) gives the sliced Wasserstein flow of Liutkus et al. (2019).
The particle side is smoothed exactly by default (:func:`~swflow.kernels.drift.exact_smoothed_drift`);
``smoothing='sampled'`` reproduces 004's one-draw estimator. With ``manifold='sphere'`` (rows on
the unit sphere, as every shipped autoencoder makes them) the particles start on the sphere and
are retracted onto it after each step: post-processing of released quantities, no privacy cost.
The simulator owns its own generator (initial particles, directions, sampled smoothing,
diffusion); privacy randomness belongs to the :class:`~swflow.privacy.PrivateTarget`.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Sequence

import torch
from torch import Tensor

from ..kernels.drift import DriftResult, OneProcess, Workspace, binned_drift, clip_rows, exact_smoothed_drift
from ..core.config import FlowConfig, SimulatorSettings
from ..privacy import PrivateTarget
from .callbacks import FlowCallback
from .simulator import FlowDiverged, Simulator, target_state
from .threads import step_threads, torch_threads

__all__ = ["FlowConfig", "SimulatorSettings", "Resampled", "Presampled", "ParticleFlow", "OneProcess", "FlowResult",
           "FlowDiverged", "initial_particles"]

#: particles beyond this many times max(1, R) (or not finite) mean the flow diverged
ESCAPE_FACTOR = 1e4


#: what a checkpoint rewound to its release (step 0, after a divergence) may change on resume: settings only the
#: steps read. The release, its noise, the directions, the particles' start and count stay as they were.
REWOUND_FREE = ("steps", "step_size", "drift_clip", "diffusion", "record_every", "checkpoint_every")


DTYPES = {"float32": torch.float32, "float64": torch.float64}


class Resampled:
    """DPSWflow-r: ``n_projections`` fresh directions and one private release per step."""

    name = "resampled"

    def __init__(self, n_projections: int):
        if n_projections < 1:
            raise ValueError(f"n_projections must be >= 1, got {n_projections}")
        self.n_projections = n_projections

    def setup(self, target: PrivateTarget, generator: torch.Generator, *, dtype, device) -> None:
        pass

    def next(self, target: PrivateTarget, generator: torch.Generator, *, dtype, device):
        theta = target.directions(self.n_projections, generator=generator, device=device, dtype=dtype)
        released, sigma = target.release(theta)
        return theta, released.to(device=device, dtype=dtype), sigma

    def state_dict(self) -> dict:
        return {"n_projections": self.n_projections}

    def load_state_dict(self, state: dict) -> None:
        if state["n_projections"] != self.n_projections:
            raise ValueError("checkpoint was written with a different number of projections")

    def describe(self) -> dict:
        return {"strategy": self.name, "n_projections": self.n_projections}


class Presampled:
    """DPSWflow: a pool of ``pool_size`` directions released ONCE; ``per_step`` of them used per step."""

    name = "presampled"

    def __init__(self, pool_size: int, per_step: int):
        if pool_size < 1 or per_step < 1:
            raise ValueError(f"pool_size and per_step must be >= 1, got {pool_size}, {per_step}")
        if per_step > pool_size:
            raise ValueError(f"per_step={per_step} directions cannot be drawn from a pool of {pool_size}")
        self.pool_size, self.per_step = pool_size, per_step
        self._theta: Tensor | None = None
        self._released: Tensor | None = None
        self._sigma = 0.0

    def setup(self, target: PrivateTarget, generator: torch.Generator, *, dtype, device) -> None:
        if self._released is not None:  # restored from a checkpoint: never release again
            return
        self._theta = target.directions(self.pool_size, generator=generator, device=device, dtype=dtype)
        released, self._sigma = target.release(self._theta)
        self._released = released.to(device=device, dtype=dtype)

    def next(self, target: PrivateTarget, generator: torch.Generator, *, dtype, device):
        pick = torch.randperm(self.pool_size, generator=generator, device=generator.device)[: self.per_step]
        pick = pick.to(self._theta.device)
        return self._theta[:, pick], self._released[pick], self._sigma

    def state_dict(self) -> dict:
        # The pool is public after its release; it is what a resumed run must reuse.
        return {"pool_size": self.pool_size, "per_step": self.per_step, "theta": self._theta,
                "released": self._released, "sigma": self._sigma}

    def load_state_dict(self, state: dict) -> None:
        if (state["pool_size"], state["per_step"]) != (self.pool_size, self.per_step):
            raise ValueError("checkpoint was written with a different pool")
        self._theta, self._released, self._sigma = state["theta"], state["released"], state["sigma"]

    def describe(self) -> dict:
        return {"strategy": self.name, "pool_size": self.pool_size, "n_projections": self.per_step}


def initial_particles(n: int, d: int, *, init: str, generator: torch.Generator, dtype, device) -> Tensor:
    """n draws from μ0: standard normal, or uniform on the unit sphere. Shape (n, d)."""
    x = torch.randn(n, d, generator=generator, device=generator.device, dtype=torch.float64)
    if init == "sphere":
        x = x / x.norm(dim=1, keepdim=True)
    return x.to(device=device, dtype=dtype)


@dataclass
class FlowResult:
    """particles (n, d); steps done; (step, RMS projected displacement) on about 100 steps."""

    particles: Tensor
    steps: int
    diagnostics: list[tuple[int, float]] = field(default_factory=list)


class ParticleFlow(Simulator):
    """Euler–Maruyama simulation of the smoothed sliced-Wasserstein flow towards a target.

    Parameters
    ----------
    target : PrivateTarget
        The private (or public, for SWF) rows, behind their release mechanism.
    strategy : Resampled | Presampled
    config : FlowConfig
    callbacks : observers of the run (:mod:`swflow.simulate.callbacks`): checkpoints, trajectory, release
        log, progress bar. The loop itself does no I/O.
    communicator : where the particles live (:class:`OneProcess`, the default, or
        :class:`swflow.simulate.distributed.ProcessGroup` for particles sharded over processes)
    """

    kind = "flow"

    @property
    def rewindable(self) -> bool:
        """Every release happened before the first step (a released pool or histogram): a rerun from step 0 with
        other step settings spends nothing again."""
        return isinstance(self.strategy, Presampled)

    def __init__(self, target: PrivateTarget, strategy, config: FlowConfig, *,
                 callbacks: Sequence[FlowCallback] = (), communicator=None):
        self.target, self.strategy, self.config = target, strategy, config
        self.communicator = communicator or OneProcess()
        self.workspace = Workspace()  # the step's (k, n) buffers, reused from step to step
        self.callbacks = list(callbacks)
        self.device = torch.device(config.device)
        self.dtype = DTYPES[config.dtype]
        self.generator = torch.Generator(device=self.device).manual_seed(config.seed)
        self.step = 0
        self.dim = target.dim  # the rows' dimension, which the particles share
        # every process draws all n and keeps its part: the same stream as one process
        everyone = initial_particles(config.n_particles, self.dim, init=config.init, generator=self.generator,
                                     dtype=self.dtype, device=self.device)
        self.particles = self.communicator.keep(everyone, 0)
        self._set_up = False
        # the scale particles may reach: the rows' bound R, or the initial particles' radius (all of them, so
        # every process stops at the same bound)
        cal = getattr(target, "calibration", None)
        self._scale = max(float(everyone.abs().amax()), cal.spec.norm_bound if cal is not None else 1.0)
        # a small step on one CPU thread, scoped to the step (swflow.simulate.threads): beside busy processes each
        # parallel pass waits for a descheduled thread (a 10^4-particle step 5-20x slower on two threads)
        self._threads = (step_threads(self.particles.shape[0], strategy.describe()["n_projections"])
                         if self.device.type == "cpu" else None)

    # -- state ---------------------------------------------------------------------------------
    def describe(self) -> dict:
        return {**asdict(self.config), **self.strategy.describe(), "batch_size": self.target.batch_size,
                "dim": self.dim, "dataset_size": self.target.size}

    def privacy_report(self, method: str, run_config: dict | None = None):
        """privacy.json for this flow: the target's report, the per-step diffusion γ and what the
        simulator did to the particles after the releases (post-processing, no privacy cost)."""
        from ..privacy import diffusion_gamma, privacy_report

        cfg = self.config
        gamma = diffusion_gamma(drift_clip=cfg.drift_clip, step_size=cfg.step_size, diffusion=cfg.diffusion,
                                n_particles=cfg.n_particles) if self.target.private else None
        post = ("particles retracted onto the unit sphere after every step" if cfg.manifold == "sphere"
                else "none")
        return privacy_report(method, self.target, diffusion_gamma=gamma, notes={"particle_post_processing": post},
                              run_config={"method": method, **self.describe(), **(run_config or {})})

    def state_dict(self) -> dict:
        """Everything needed to continue bit-identically; holds no private row."""
        return {"step": self.step, "particles": self.particles.cpu(),
                "generator": self.generator.get_state(), "strategy": self.strategy.state_dict(),
                "target": self.target.state_dict(),
                "config": asdict(self.config)}

    def load_state_dict(self, state: dict) -> None:
        self.check_config(state["config"], free=REWOUND_FREE if state.get("rewound") else ())
        self.step = state["step"]
        self.particles = state["particles"].to(device=self.device, dtype=self.dtype)
        self.generator.set_state(state["generator"])
        self.strategy.load_state_dict(state["strategy"])
        self.target.load_state_dict(target_state(state))
        self._set_up = True

    # -- the loop ------------------------------------------------------------------------------
    def _randn(self, *shape: int) -> Tensor:
        return torch.randn(*shape, generator=self.generator, device=self.device, dtype=self.dtype)

    # Draws of public randomness shaped like *all* particles; each process keeps its part.
    def _particle_noise(self, k: int) -> Tensor:
        return self.communicator.keep(self._randn(k, self.config.n_particles), 1)

    def _diffusion_noise(self) -> Tensor:
        return self.communicator.keep(self._randn(self.config.n_particles, self.particles.shape[1]), 0)

    def gather_particles(self) -> Tensor:
        """All particles (n, d), in the one-process order (every process's, when they are sharded)."""
        return self.communicator.gather(self.particles)

    def drift(self, theta: Tensor, released: Tensor, sigma: float) -> DriftResult:
        """Drift (n, d) of the current particles towards ``released`` (k, m) on ``theta`` (d, k)."""
        cfg = self.config
        std = sigma if cfg.smoothing_std is None else cfg.smoothing_std
        if released.shape[1] == 0:  # an empty Poisson batch released pure noise: no drift
            return DriftResult(torch.zeros_like(self.particles), self.particles.new_zeros(()))
        if std > 0 and cfg.smoothing == "exact":
            return exact_smoothed_drift(self.particles, released, theta, noise_std=std, reduce=self.communicator,
                                        workspace=self.workspace)
        if std == 0 and cfg.particle_cdf == "binned":
            return binned_drift(self.particles, released, theta, reduce=self.communicator, workspace=self.workspace)
        proj = theta.T @ self.particles.T  # (k, n)
        if std > 0:
            proj = proj + std * self._particle_noise(theta.shape[1])
        return self.communicator.sampled_drift(proj, released, theta)

    def step_once(self) -> Tensor:
        """One Euler–Maruyama step; returns the step's RMS projected displacement (a 0-d tensor). A small step on
        the CPU runs on one torch thread, the process's count restored after it (swflow.simulate.threads)."""
        with torch_threads(self._threads):
            return self._step()

    def _step(self) -> Tensor:
        cfg = self.config
        theta, released, sigma = self.strategy.next(self.target, self.generator,
                                                    dtype=self.dtype, device=self.device)
        for callback in self.callbacks:
            callback.on_release(self, theta, released, sigma)
        drift, w2 = self.drift(theta, released, sigma)
        if cfg.drift_clip is not None:
            drift = clip_rows(drift, cfg.drift_clip)
        # in place on fresh tensors (the same roundings as x + h·drift + c·noise): at n = 10⁶ every
        # (n, d) temporary is another pass over 32 MB; x row-major, as the particles are, whatever the drift's layout
        x = torch.mul(drift, cfg.step_size, out=torch.empty_like(self.particles)).add_(self.particles)
        if cfg.diffusion > 0:
            x.add_(self._diffusion_noise().mul_(math.sqrt(2.0 * cfg.diffusion * cfg.step_size)))
        if cfg.manifold == "sphere":
            norms = torch.linalg.vector_norm(x, dim=1, keepdim=True)
            x.div_(norms.clamp(min=torch.finfo(x.dtype).tiny))
            self._check_finite(norms, finite_only=True)  # retracted coordinates are at most 1: only NaN/inf escape
        else:
            self._check_finite(x)
        self.particles = x
        self.step += 1
        return w2

    def _check_finite(self, x: Tensor, *, finite_only: bool = False) -> None:
        """Stop a run whose particles (or, ``finite_only``, the row norms of particles retracted onto the sphere)
        hold NaN or inf, or coordinates beyond ESCAPE_FACTOR times the scale they started at."""
        largest = float(torch.linalg.vector_norm(x, ord=math.inf))  # max |x_ij|, NaN if any is
        limit = math.inf if finite_only else ESCAPE_FACTOR * max(1.0, self._scale)
        if not largest <= limit:  # also catches NaN
            what = "non-finite values (NaN/inf)" if not math.isfinite(largest) else f"coordinates up to {largest:.3g}"
            raise FlowDiverged(
                f"the flow diverged at step {self.step + 1}: the particles reached {what}, beyond {limit:g}. Try a "
                f"smaller step size (e.g. --step-size {self.config.step_size / 10:g}) or more smoothing")

    def setup(self) -> None:
        """The strategy's one-off release (pool, histogram, local), unless restored from a checkpoint."""
        if not self._set_up:
            self.strategy.setup(self.target, self.generator, dtype=self.dtype, device=self.device)
            self._set_up = True

    def run(self) -> FlowResult:
        """Run (or continue, when a callback restores a checkpoint) to ``config.steps``."""
        diagnostics = self.simulate()
        return FlowResult(self.particles, self.step, diagnostics)

    def budget_label(self) -> str:
        cal = self.target.calibration
        if cal is None:
            return "(eps=inf)"
        return f"(eps<={cal.epsilon:.2f}, delta={cal.spec.delta:.0e}, {cal.spec.adjacency})"
