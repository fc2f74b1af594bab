"""The private target: the only object that holds private rows, and what it may release.

It validates the rows (finite, inside the norm ball — or clipped when asked), draws batches and
noise from the privacy :class:`NoiseSource`, records every release in the :class:`PrivacyLedger`
*before* returning it, and refuses to release beyond the planned budget. What comes out is the
noisy projections, each row sorted — the order that would link a value to a record is gone.
"""
from __future__ import annotations

import math
from typing import Callable

import torch
from torch import Tensor

from ..kernels.sliced import project, sort_rows
from .calibrate import Calibration
from .ledger import PrivacyLedger
from .noise import NoiseSource
from .sensitivity import SensitivityBound

__all__ = ["BudgetExhausted", "check_rows", "PrivateTarget"]


class BudgetExhausted(RuntimeError):
    """A release beyond what the privacy budget was calibrated for."""


def check_rows(data: Tensor, *, name: str = "data", allow_empty: bool = False) -> None:
    """Refuse empty (unless ``allow_empty``: a part of a larger data set), non-2-D or non-finite input with a
    message that says what to do."""
    if not isinstance(data, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape (n, d), got {type(data).__name__}")
    if data.ndim != 2:
        raise ValueError(f"{name} must be 2-D (rows = records), got shape {tuple(data.shape)}")
    if data.shape[0] == 0 and not allow_empty:
        raise ValueError(f"{name} is empty: need at least one row")
    bad = ~torch.isfinite(data).all(dim=1)
    if bad.any():
        # how many, never which: a row's index or value is a private statistic
        raise ValueError(f"{name} has {int(bad.sum())} row(s) with NaN or inf; drop or impute them before the run")


class PrivateTarget:
    """Private rows behind a release mechanism.

    Parameters
    ----------
    data : Tensor, shape (m, d)
    calibration : Calibration or None
        None runs without privacy (no noise, nothing to account, ε = ∞).
    noise : NoiseSource
    ledger : PrivacyLedger
        Append-only; a resumed run passes the ledger from its checkpoint.
    batch_size : int or None
        Rows per release; None releases the whole set every time.
    dataset_size : int or None
        Number of records in the whole private set when ``data`` is one shard of it
        (:class:`swflow.simulate.distributed.ShardedTarget`); None: ``data`` is the whole set.
    """

    #: whether the target can count rows that stay on disk (privacy/rows.py): only sums over rows can
    streams = False

    def __init__(self, data, calibration: Calibration | None, *, noise: NoiseSource,
                 ledger: PrivacyLedger, batch_size: int | None = None, dataset_size: int | None = None):
        from .rows import ChunkedRows

        streamed = isinstance(data, ChunkedRows)
        if streamed and not self.streams:
            raise TypeError(f"{type(self).__name__} needs the private rows in memory; only the sliced histogram "
                            "(a sum over rows) reads them from disk in chunks")
        if not streamed:
            check_rows(data, name="private data", allow_empty=dataset_size is not None)
        m = dataset_size or data.shape[0]  # a shard (or a class) of a larger set knows the global size
        if batch_size is not None and not 1 <= batch_size <= m:
            raise ValueError(f"batch_size={batch_size} must be between 1 and the number of private "
                             f"rows ({m})")
        self._calibration = calibration
        if calibration is not None:
            if not streamed:  # streamed rows are checked chunk by chunk, as they are counted
                data = self._bounded(data, calibration.spec.norm_bound, calibration.spec.clip)
            if calibration.plan.dataset_size != m or calibration.plan.dim != data.shape[1]:
                raise ValueError("calibration plan does not match the private data's shape")
        self._data = data
        self._fingerprint = self._fingerprint_of(data, calibration, batch_size, m)
        self._size = m
        self._noise = noise
        self.ledger = ledger
        self.batch_size = batch_size

    @staticmethod
    def _bounded(data: Tensor, radius: float, clip: bool) -> Tensor:
        """Rows inside the ball of radius R. Rows above it by float rounding (≤ 1e-5 relative, as unit
        latents are) are clipped silently, larger excess only with ``clip``: no row above R is used."""
        norms = data.norm(dim=1)
        outside = norms > radius * (1 + 1e-5)
        if outside.any() and not clip:
            raise ValueError(
                f"{int(outside.sum())} private row(s) have norm above R={radius}; the sensitivity bound needs "
                "every row inside the ball. "
                "Pass clip=True (CLI: --clip) to clip them, or rescale the data")
        if (norms > radius).any():
            data = data * (radius / norms.clamp(min=radius)).unsqueeze(1)
            # the rescaled norms can round a hair above R: pull them strictly inside
            data = data * torch.where(data.norm(dim=1) > radius, 1 - 1e-7, 1.0).to(data.dtype).unsqueeze(1)
        return data

    @property
    def dim(self) -> int:
        return self._data.shape[1]

    @property
    def size(self) -> int:
        return self._size

    @property
    def private(self) -> bool:
        return self._calibration is not None

    @property
    def calibration(self) -> Calibration | None:
        return self._calibration

    def noise_std(self, theta: Tensor) -> float:
        """σ the release on directions ``theta`` (d, k) carries (0 without privacy)."""
        if self._calibration is None:
            return 0.0
        return self._calibration.noise_multiplier * self._calibration.sensitivity(theta).value

    @property
    def secret_directions(self) -> bool:
        """Whether directions must come from the privacy stream: a probabilistic sensitivity bound
        (Bernstein, CLT) holds only for directions drawn independently of the neighbouring pair,
        which a Θ known in advance (public seed) would let an adversary choose against."""
        return self._calibration is not None and self._calibration.spec.sensitivity_bound != "spectral"

    def directions(self, count: int, *, generator: torch.Generator, device, dtype) -> Tensor:
        """Directions (d, count) for the next release: from the secret privacy stream when the bound
        needs it, else from the simulator's public ``generator`` (the spectral bound holds for any Θ)."""
        if self.secret_directions:
            return self._noise.directions(self.dim, count).to(device=device, dtype=dtype)
        from ..kernels.sliced import random_directions

        return random_directions(count, self.dim, generator=generator, device=device, dtype=dtype)

    @property
    def noise_seed_known(self) -> bool:
        return self._noise.seed_known

    def _batch_indices(self) -> Tensor | None:
        """Indices of the next batch among all ``size`` records (None: every record)."""
        m = self.size
        if self.batch_size is None or self.batch_size == m:
            return None
        if self._calibration is not None and self._calibration.sampling == "poisson":
            return self._noise.poisson_subset(m, self.batch_size / m)
        return self._noise.subset_without_replacement(m, self.batch_size)

    def _batch(self) -> Tensor:
        idx = self._batch_indices()
        return self._data if idx is None else self._data[idx.to(self._data.device)]

    def _check_budget(self) -> None:
        cal = self._calibration
        if cal is not None and self.ledger.releases >= cal.plan.releases:
            raise BudgetExhausted(
                f"the budget was calibrated for {cal.plan.releases} release(s) and all are spent; "
                "a further step would exceed the reported epsilon — plan more steps up front")

    def _privatize(self, values: Tensor, sens: SensitivityBound) -> tuple[Tensor, float]:
        """The one place where private values get their noise: ledger event first, then the Gaussian draw."""
        cal = self._calibration
        sigma = cal.noise_multiplier * sens.value
        self.ledger.record(cal.event(sens, sample_size=cal.plan.rows_per_release))
        return values + self._noise.gaussian(tuple(values.shape), sigma, device=values.device,
                                             dtype=values.dtype), sigma

    def _noised(self, rows: Tensor, theta: Tensor) -> tuple[Tensor, float]:
        """Projections of ``rows`` on ``theta`` plus calibrated noise: (k, b) values, unsorted, and σ."""
        self._check_budget()
        theta = theta.to(device=rows.device, dtype=rows.dtype)
        values = project(rows, theta)
        if self._calibration is None:
            return values, 0.0
        return self._privatize(values, self._calibration.sensitivity(theta))

    def release_statistic(self, statistic: Callable[[Tensor], Tensor],
                          sensitivity: SensitivityBound) -> tuple[Tensor, float]:
        """Noisy ``statistic(batch)`` of one private batch, for a statistic whose ℓ2 sensitivity under
        the spec's adjacency is at most ``sensitivity.value`` by a proof the caller enforces (e.g. the
        clipped Wasserstein gradient of 000 Theorem 4.1). Budget check, ledger and noise as for
        projections; the batch never leaves this object except through ``statistic``."""
        self._check_budget()
        value = statistic(self._batch())
        if self._calibration is None:
            return value, 0.0
        return self._privatize(value, sensitivity)

    def release(self, theta: Tensor) -> tuple[Tensor, float]:
        """Noisy projections of a batch on ``theta`` (d, k), each row sorted: shape (k, b), and σ."""
        values, sigma = self._noised(self._batch(), theta)
        return sort_rows(values)[0], sigma

    @staticmethod
    def _fingerprint_of(data, calibration: Calibration | None, batch_size: int | None, size: int) -> dict:
        """What a resumed run must share with its checkpoint: the private rows (as a SHA-256, never the
        rows), their number, the batch size and the privacy calibration."""
        import hashlib
        from dataclasses import asdict

        if isinstance(data, Tensor):  # float64 bytes, hashed a block of rows at a time (a table's one-hot rows are GBs)
            digest = hashlib.sha256(repr(tuple(data.shape)).encode())
            for block in data.detach().split(1 << 14) if data.dim() else [data]:
                digest.update(block.to("cpu", torch.float64).contiguous().numpy().tobytes())
            digest = digest.hexdigest()
        else:  # rows on disk, hashed chunk by chunk
            digest = data.sha256()
        privacy = None if calibration is None else {
            **asdict(calibration.spec), "noise_multiplier": calibration.noise_multiplier,
            "planned_releases": calibration.plan.releases}
        return {"data_sha256": digest, "dataset_size": size, "batch_size": batch_size, "privacy": privacy}

    def public_release(self) -> dict:
        """Arrays of a one-off release kept whole in model.h5 beside the per-step log, for read-back checks
        (a histogram's noisy counts); empty for releases the per-step log already holds."""
        return {}

    def state_dict(self) -> dict:
        """The ledger (the budget spent so far) and the privacy noise source's state, for an exact resume
        (checkpoints only, never outputs), with the fingerprint of the data and privacy settings it belongs to."""
        return {"ledger": self.ledger.state_dict(),
                "noise": {**self._noise.state_dict(), "fingerprint": self._fingerprint}}

    def load_state_dict(self, state: dict) -> None:
        """Restore a checkpoint's ledger and noise state: the spent budget is never reset. Refuses a
        checkpoint written for other private rows or other privacy settings, saying what differs."""
        noise = state["noise"]
        saved = noise.get("fingerprint")
        if saved is not None and saved != self._fingerprint:
            raise ValueError("cannot resume: " + _differences(saved, self._fingerprint))
        self.ledger = PrivacyLedger.from_state_dict(state["ledger"])
        self._noise.load_state_dict({k: v for k, v in noise.items() if k != "fingerprint"})

    def epsilon_spent(self) -> float:
        """Accounted ε of what the ledger holds so far (∞ without privacy)."""
        from .accountants import epsilon_from_events

        if self._calibration is None:
            return math.inf
        cal = self._calibration
        return epsilon_from_events(tuple(self.ledger.events), delta=cal.delta_accountant, adjacency=cal.spec.adjacency)


def _differences(saved: dict, now: dict) -> str:
    """'what differs' between a checkpoint's fingerprint and this run's, for the error message."""
    parts = []
    if saved["data_sha256"] != now["data_sha256"]:
        parts.append("the private rows differ from the checkpoint's (another file, or changed rows)")
    for key in ("dataset_size", "batch_size"):
        if saved[key] != now[key]:
            parts.append(f"{key} is {now[key]} now but {saved[key]} in the checkpoint")
    old, new = saved["privacy"] or {}, now["privacy"] or {}
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            parts.append(f"{key} is {new.get(key)} now but {old.get(key)} in the checkpoint")
    return "; ".join(parts) + ". Resume with the run's own settings and data, or start a new run elsewhere"


class LocallyReleasedTarget(PrivateTarget):
    """Local DP: every record is released ONCE as y + N(0, σ² I); the flow then uses only those rows.

    The release is a single Gaussian mechanism on identity directions (‖I‖₂ = 1, so the
    sensitivity is 2R under replace-one, the local guarantee for any two records), calibrated
    by a plan with one release of all rows on ``dim`` projections. It happens on the first call
    to :meth:`release` and is restored, never redrawn, on resume. Later projections of the
    released rows are post-processing: no noise, no ledger entry.
    """

    def __init__(self, data: Tensor, calibration: Calibration, *, noise: NoiseSource, ledger: PrivacyLedger,
                 batch_size: int | None = None):
        plan = calibration.plan
        if (plan.releases, plan.sample_size, plan.n_projections) != (1, None, data.shape[1]):
            raise ValueError("a local release is one release of every row on the identity directions")
        super().__init__(data, calibration, noise=noise, ledger=ledger, batch_size=None)
        self.flow_batch_size = batch_size
        self._released: Tensor | None = None

    @property
    def local_noise_std(self) -> float:
        return self.noise_std(torch.eye(self.dim, dtype=torch.float64))

    def released_rows(self) -> Tensor:
        """The noisy rows (m, d), released on first use."""
        if self._released is None:  # identity directions: the projections are the rows themselves
            values, _ = self._noised(self._data, torch.eye(self.dim, dtype=self._data.dtype))
            self._released = values.T.contiguous()
        return self._released

    def release(self, theta: Tensor) -> tuple[Tensor, float]:
        rows = self.released_rows()
        if self.flow_batch_size is not None and self.flow_batch_size < rows.shape[0]:
            rows = rows[self._noise.subset_without_replacement(rows.shape[0], self.flow_batch_size).to(rows.device)]
        theta = theta.to(device=rows.device, dtype=rows.dtype)
        return sort_rows(project(rows, theta))[0], 0.0  # post-processing: no new noise

    def state_dict(self) -> dict:
        state = super().state_dict()
        return {**state, "noise": {**state["noise"], "released": self._released}}

    def load_state_dict(self, state: dict) -> None:
        noise = state["noise"]
        super().load_state_dict({**state, "noise": {k: v for k, v in noise.items() if k != "released"}})
        self._released = noise["released"]
