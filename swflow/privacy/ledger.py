"""Append-only privacy ledger: one immutable event per kind of release, with a count."""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace

__all__ = ["ADAPT_BOUND", "NOISES", "SAMPLINGS", "SELECTION", "MechanismEvent", "PrivacyLedger"]

from ..core.config import NOISES  # noqa: E402

#: the ledger's mechanism of a private choice (privacy/selection.py): rounds of the exponential mechanism
SELECTION = "exponential"

SAMPLINGS = ("none", "without-replacement", "poisson")
#: the sensitivity bound of a DP-SGD event (the decoder's adaptation): the ledger entry an adapted decoder requires
ADAPT_BOUND = "per-image clipped gradient (Opacus), replaced: 2C"


@dataclass(frozen=True)
class MechanismEvent:
    """A Gaussian release of projected private rows, possibly on a subsample, repeated ``count`` times.

    noise_multiplier : σ / sensitivity (what the accountant sees)
    noise_std : absolute σ added to each released projection (largest over the repeats)
    sensitivity : ℓ2 sensitivity bound used (largest over the repeats)
    sensitivity_bound : 'bernstein' | 'clt' | 'spectral'
    delta_sensitivity : failure probability of the bound (or, for a partition selection, the probability that a
        value only one record holds is named: privacy/values.py), charged to δ per release beside the accountant's
    sampling : 'none' (whole data set), 'without-replacement' (fixed size) or 'poisson'
    sample_size : batch size (expected size under Poisson); dataset_size when sampling is 'none'
    dataset_size : number of private records
    n_projections : directions per release
    count : repeats of this release
    mechanism : one of NOISES, or SELECTION: ``count`` rounds of the exponential mechanism (privacy/selection.py),
        each ε₀-DP with ε₀ = 2 / noise_multiplier, and (ε₀²/8)-zCDP; noise_std is then its Gumbel scale
    contribution : the most one privacy unit moves a released count (its rows' weights, summed: a table run with a
        privacy unit; 1 where the unit is one record). The sensitivity is this times a record's.
    measurement : the name of what the release measured, where a run names its releases (a table run's: 'pair
        tables', 'one-way trees', ...: swflow/pipeline/table_measurements.py); None elsewhere
    """

    noise_multiplier: float
    noise_std: float
    sensitivity: float
    sensitivity_bound: str
    delta_sensitivity: float
    sampling: str
    sample_size: int
    dataset_size: int
    n_projections: int
    count: int = 1
    mechanism: str = "gaussian"
    contribution: int = 1
    measurement: str | None = None

    def __post_init__(self):
        if self.mechanism not in (*NOISES, SELECTION):
            raise ValueError(f"mechanism must be one of {(*NOISES, SELECTION)}, got {self.mechanism!r}")
        if self.mechanism == SELECTION and (self.sampling != "none" or self.contribution != 1):
            raise ValueError("a private choice reads the whole data set, one record per unit")
        if self.sampling not in SAMPLINGS:
            raise ValueError(f"sampling must be one of {SAMPLINGS}, got {self.sampling!r}")
        if self.count < 1:
            raise ValueError(f"count must be >= 1, got {self.count}")
        if isinstance(self.contribution, bool) or not isinstance(self.contribution, int) or self.contribution < 1:
            raise ValueError(f"contribution must be a whole number >= 1, got {self.contribution!r}")

    @property
    def sample_rate(self) -> float:
        return self.sample_size / self.dataset_size

    def to_dp_event(self):
        """The dp-accounting event of ONE of the ``count`` releases (compose it ``count`` times): a
        Gaussian, inside the sampling wrapper that matches ``sampling``. The accountants take only this."""
        import dp_accounting as dpa

        if self.mechanism == SELECTION:  # a bounded-range round: (ε₀²/8)-zCDP, ε₀ = 2/multiplier
            return dpa.ZCDpEvent(1.0 / (2.0 * self.noise_multiplier ** 2))
        # The discrete Gaussian of scale σ satisfies the continuous one's Rényi bound, (Δ²/2σ²)-zCDP (Canonne,
        # Kamath & Steinke 2020, Thm 14), so inside a composition its Gaussian event is an upper bound; a single
        # discrete release is accounted more tightly by its own privacy loss distribution (accountants._discrete).
        base = dpa.GaussianDpEvent(self.noise_multiplier)
        if self.sampling == "without-replacement":
            return dpa.SampledWithoutReplacementDpEvent(self.dataset_size, self.sample_size, base)
        if self.sampling == "poisson":
            return dpa.PoissonSampledDpEvent(self.sample_rate, base)
        return base

    def same_kind(self, other: "MechanismEvent") -> bool:
        return (self.noise_multiplier, self.sensitivity_bound, self.delta_sensitivity, self.sampling,
                self.sample_size, self.dataset_size, self.n_projections, self.mechanism, self.contribution,
                self.measurement) == (
            other.noise_multiplier, other.sensitivity_bound, other.delta_sensitivity, other.sampling,
            other.sample_size, other.dataset_size, other.n_projections, other.mechanism, other.contribution,
            other.measurement)

    def state(self) -> dict:
        """The event as a ledger entry of privacy.json (its name only where it has one)."""
        state = asdict(self)
        if state["measurement"] is None:
            del state["measurement"]
        return state


class PrivacyLedger:
    """Every mechanism invocation of a run, in order; repeats of one kind are merged into a count."""

    def __init__(self, events: list[MechanismEvent] | None = None):
        self._events: list[MechanismEvent] = list(events or [])

    @property
    def events(self) -> tuple[MechanismEvent, ...]:
        return tuple(self._events)

    @property
    def releases(self) -> int:
        return sum(e.count for e in self._events)

    @property
    def delta_sensitivity(self) -> float:
        """Total failure probability of the sensitivity bounds (a union bound over releases)."""
        return sum(e.count * e.delta_sensitivity for e in self._events)

    def record(self, event: MechanismEvent) -> None:
        last = self._events[-1] if self._events else None
        if last is not None and last.same_kind(event):
            self._events[-1] = replace(last, count=last.count + event.count,
                                       noise_std=max(last.noise_std, event.noise_std),
                                       sensitivity=max(last.sensitivity, event.sensitivity))
        else:
            self._events.append(event)

    def state_dict(self) -> list[dict]:
        return [e.state() for e in self._events]

    @classmethod
    def from_state_dict(cls, state: list[dict]) -> "PrivacyLedger":
        return cls([MechanismEvent(**e) for e in state])

    def __len__(self) -> int:
        return len(self._events)
