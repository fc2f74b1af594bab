"""Read-back checks: a privacy claim is re-derived from what was released, never copied on trust.

A finished flow's ``privacy.json`` and ``model.h5`` (or a saved Synthesizer) are inputs like any other:
they can be edited. Before ``swflow sample`` or ``Synthesizer.load`` passes a claim on, it recomputes
it from the recorded mechanism and refuses the file when anything disagrees. Nothing returns early:
every check below runs for every report.

What is checked:

* ε from the report's own ledger, with the accountant the adjacency and sampling call for, and
  δ = δ_accountant + the ledger's sensitivity failures; the accountant's name;
* every field derived from the ledger (noise multiplier, noise std, sensitivity, steps, directions,
  data set size, sample rate, mechanism) and the one-line ``statement``, recomputed and compared;
* every ledger event's σ = multiplier × sensitivity, and the histogram's sensitivity √(2K);
* a conditional run: every class's ledger, as above, and the composition it names: with labels
  public, (ε, δ) = the largest class's; with labels private, every class's release is the same
  mechanism (same multiplier, K and B), and (ε, δ) is that mechanism's;
* for releases of noisy projections, each recorded step's σ from the recorded directions: the
  spectral bound ‖Θ‖₂ gives the sensitivity, so a step recorded with σ = 0 (or any other σ than the
  calibrated one) is caught; the number of recorded releases equals the ledger's;
* for the sliced histogram, the released noisy counts themselves against the claimed noise: each
  direction's counts sum to the same number of rows plus noise of variance B·σ² (at most, for the
  discrete Gaussian), so the spread of the K row sums about their mean, Σ_k (s_k − s̄)² / (B σ²), is χ²
  with K − 1 degrees of freedom (whatever the rows' number, which a class of a labels-private run
  keeps private). A claim of much more noise than the counts carry (the self-consistent forgery: σ × 10
  and ε recomputed) lands far in the lower tail and is refused; so are directions that disagree far
  more than the noise allows.

What cannot be proven from the files: that the noise was drawn at random (a file built from exact
counts plus chosen "noise" passes if its spread is right); that the rows were bounded as claimed;
that a per-step release's values carry the claimed noise (only its recorded σ is checked); the
χ² test has a false refusal rate of 1e-9 and detects a claimed σ only when it is off by a factor of
about 2 or more at K = 32 (sharper as K grows).
"""
from __future__ import annotations

import math

import torch

from .accountants import accountant_for, epsilon_from_events
from .counts import COUNTS_FALSE_REFUSAL, ClaimMismatch, check_tables, verify_counts, verify_tables
from .histogram import histogram_sensitivity
from .ledger import ADAPT_BOUND, MechanismEvent
from .sensitivity import adjacency_factor, spectral_bound

__all__ = ["COUNTS_FALSE_REFUSAL", "ClaimMismatch", "verify_report", "verify_releases", "verify_counts",
           "verify_tables", "verify_adapted_decoder", "read_verified_report"]

_RTOL = 1e-6


#: an ε-mode run's releases reach at least this fraction of its target ε (calibration stops within 0.1%)
CALIBRATION_REACH = 0.95


def _close(a: float, b: float, rtol: float = _RTOL) -> bool:
    return math.isclose(a, b, rel_tol=rtol, abs_tol=1e-12)


def _same(a, b, rtol: float = _RTOL) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return (math.isinf(a) and math.isinf(b)) or _close(float(a), float(b), rtol)
    return a == b


class _Refusal:
    def __init__(self, source: str):
        self.source = source

    def __call__(self, what: str):
        raise ClaimMismatch(f"{self.source} is inconsistent: {what}. The file was edited or corrupted; regenerate it "
                            "from the run (nothing was sampled)")


def _events(ledger, refuse) -> tuple[MechanismEvent, ...]:
    if not isinstance(ledger, list):
        refuse("a ledger is not a list of releases")
    try:
        return tuple(MechanismEvent(**e) for e in ledger)
    except TypeError as err:
        refuse(f"its ledger is malformed ({err})")


def _ledger_claim(events, *, adjacency: str, delta_accountant: float, refuse) -> tuple[float, float, str]:
    """(ε, δ, accountant name) that ``events`` give, after checking each event's noise and sensitivity."""
    if not events:
        refuse("it claims privacy but records no release")
    for e in events:
        if not _close(e.noise_std, e.noise_multiplier * e.sensitivity):
            refuse(f"a release's noise std {e.noise_std} is not its multiplier {e.noise_multiplier} times its "
                   f"sensitivity {e.sensitivity}")
        if e.sensitivity_bound == "histogram":
            expected = histogram_sensitivity(e.n_projections, adjacency=adjacency, contribution=e.contribution).value
            if not _close(e.sensitivity, expected):
                refuse(f"the histogram's sensitivity {e.sensitivity} is not {expected} for K = {e.n_projections}"
                       f"{'' if e.contribution == 1 else f' and a unit of weight {e.contribution}'}")
        elif e.contribution != 1:
            refuse("a release of projected rows records a unit's contribution: only counts are released per unit")
    try:
        accountant = accountant_for(events, adjacency=adjacency)
    except ValueError as err:
        refuse(f"its releases cannot be accounted under {adjacency!r} ({err})")
    epsilon = epsilon_from_events(events, delta=delta_accountant, adjacency=adjacency)
    delta = delta_accountant + sum(e.count * e.delta_sensitivity for e in events)
    return epsilon, delta, accountant.name


def _derived(events) -> dict:
    """The report's fields that follow from its ledger alone: those of its first (main) release, and the totals
    (a ledger holds one event per kind of release: a flow's, then, say, a DP-SGD adaptation's)."""
    main = events[0]
    return {"noise_multiplier": main.noise_multiplier, "noise_std": main.noise_std, "sensitivity": main.sensitivity,
            "sensitivity_bound": main.sensitivity_bound, "steps": sum(e.count for e in events),
            "n_projections": main.n_projections, "dataset_size": main.dataset_size,
            "sample_rate": main.sample_size / main.dataset_size, "mechanism": main.mechanism,
            "delta_sensitivity": sum(e.count * e.delta_sensitivity for e in events)}


def _check_claim(report, epsilon: float, delta: float, accountant: str, refuse) -> None:
    from .report import statement, unit_of

    claimed = math.inf if report.epsilon is None else report.epsilon
    if not (_close(epsilon, claimed, 1e-4) or (math.isinf(epsilon) and math.isinf(claimed))):
        refuse(f"it claims epsilon = {claimed}, but its releases give {epsilon}")
    if report.delta is None or not _close(delta, report.delta):
        refuse(f"it claims delta = {report.delta}, but its releases give {delta}")
    if report.accountant != accountant:
        refuse(f"it names the accountant {report.accountant!r}, but its releases are accounted by {accountant!r}")
    expected = statement(claimed, report.delta, report.accountant, report.adjacency, unit_of(report))
    if report.statement != expected:
        refuse(f"its statement {report.statement!r} is not what its fields say ({expected!r})")


def verify_report(report, *, source: str = "the privacy report") -> None:
    """Refuse ``report`` (a PrivacyReport) unless its ε, δ, derived fields and statement follow from its own
    ledger (every class's ledger, for a conditional run). A malformed field (a number written as a string, a
    missing part) is refused the same way, never a crash."""
    refuse = _Refusal(source)
    try:
        _verify_report(report, refuse)
    except ClaimMismatch:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as err:
        refuse(f"a field is malformed ({type(err).__name__}: {err})")


def _verify_report(report, refuse) -> None:
    if not report.private:
        if report.ledger or report.epsilon is not None or report.delta is not None:
            refuse("it says 'not private' but carries a budget or releases")
        if report.statement != "not differentially private (no noise on the private data)":
            refuse(f"its statement {report.statement!r} does not say the run is not private")
        if report.conditional is not None:
            _check_conditional_shape(report, refuse)
        return
    if report.conditional is not None:
        _verify_conditional(report, refuse)
        return
    events = _events(report.ledger, refuse)
    _check_unit(report, events, refuse)
    epsilon, delta, accountant = _ledger_claim(events, adjacency=report.adjacency,
                                               delta_accountant=report.delta_accountant, refuse=refuse)
    _check_claim(report, epsilon, delta, accountant, refuse)
    for field, value in _derived(events).items():
        if not _same(getattr(report, field), value):
            refuse(f"its {field} {getattr(report, field)!r} is not what its ledger gives ({value!r})")
    main = events[0]
    if (report.mode == "epsilon" and report.target_epsilon is not None and main.noise_multiplier > 1e-3
            and epsilon < CALIBRATION_REACH * report.target_epsilon):
        refuse(f"its releases give epsilon = {epsilon:.4g}, far below the target {report.target_epsilon:g} they were "
               "calibrated for (calibration stops within 0.1% of its target): the noise was edited")
    recorded = report.run_config.get("dataset_size")
    if recorded is not None and recorded != report.dataset_size:
        refuse(f"its ledger counts {report.dataset_size} private rows, but its run configuration records {recorded}")


def _check_unit(report, events, refuse) -> None:
    """A report's unit and its releases agree: without a unit bound every release counts a record once; with one,
    the unit is added or removed with all of its rows (add-remove), the words name its column, and every release
    moves a count by one (the values a unit names) or by the bound's k (its rows' weights)."""
    from .units import unit_words

    bound = report.unit_bound
    if bound is None:
        if report.privacy_unit not in (None, "one row"):
            refuse(f"it protects {report.privacy_unit!r} but records no bound on a unit's rows")
        if any(e.contribution != 1 for e in events):
            refuse("its releases count a unit of several rows, but it claims to protect one row")
        return
    if not isinstance(bound, dict) or set(bound) != {"column", "max_rows_per_unit", "max_values_per_unit",
                                                       "rows_over_the_bound"}:
        refuse("its unit bound is not one swflow writes")
    k, m = bound["max_rows_per_unit"], bound["max_values_per_unit"]
    if any(isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in (k, m)):
        refuse(f"its unit bound's rows ({k!r}) and values ({m!r}) a unit are not whole numbers >= 1")
    if report.adjacency != "add-remove":
        refuse(f"a privacy unit is added or removed with all of its rows, not under {report.adjacency!r}")
    if report.privacy_unit != unit_words(bound["column"]):
        refuse(f"it protects {report.privacy_unit!r}, not what its bound's column says")
    if any(e.contribution not in (1, k) for e in events) or not any(e.contribution == k for e in events):
        refuse(f"its releases do not count a unit as its bound of {k} rows says")


def _check_conditional_shape(report, refuse) -> list:
    from ..core.config import COMPOSITIONS

    parts = report.conditional
    if set(parts) != {"per_class", "ledgers", "composition"}:
        refuse(f"its conditional part holds {sorted(parts)}, not per_class, ledgers and composition")
    if parts["composition"] not in COMPOSITIONS:
        refuse(f"it names the composition {parts['composition']!r}; swflow writes one of {COMPOSITIONS}")
    per_class, ledgers = parts["per_class"], parts["ledgers"]
    if not isinstance(per_class, list) or not isinstance(ledgers, dict) or len(per_class) < 2:
        refuse("a conditional report needs a per-class entry and a ledger for each of at least two classes")
    classes = [str(entry.get("class")) for entry in per_class]
    if sorted(classes) != sorted(ledgers) or len(set(classes)) != len(classes):
        refuse(f"its classes {classes} and its ledgers' classes {sorted(ledgers)} differ")
    if report.ledger:
        refuse("a conditional report keeps its releases in the per-class ledgers, not at the top")
    return per_class


def _verify_conditional(report, refuse) -> None:
    from ..core.config import LABELS_PRIVATE, PUBLIC_ADJACENCY

    per_class = _check_conditional_shape(report, refuse)
    private_labels = report.conditional["composition"] == LABELS_PRIVATE
    base_adjacency = report.adjacency if private_labels else "replace-one"
    if not private_labels and report.adjacency != PUBLIC_ADJACENCY:
        refuse(f"labels public, but it states the adjacency {report.adjacency!r}")
    claims, events_of = [], {}
    for entry in per_class:
        events = _events(report.conditional["ledgers"][str(entry["class"])], refuse)
        claims.append(_ledger_claim(events, adjacency=base_adjacency, delta_accountant=report.delta_accountant,
                                    refuse=refuse))
        events_of[entry["class"]] = events
        if not private_labels and not _same(entry.get("epsilon"), claims[-1][0], 1e-4):
            refuse(f"class {entry['class']} claims epsilon = {entry.get('epsilon')}, its ledger gives {claims[-1][0]}")
        if private_labels and "size" in entry:
            refuse("with private labels a report never holds exact class sizes")
    if private_labels:
        kinds = {(e.noise_multiplier, e.sensitivity, e.n_projections, e.mechanism, e.dataset_size)
                 for events in events_of.values() for e in events}
        if len(kinds) != 1 or any(len(events) != 1 or events[0].sensitivity_bound != "histogram"
                                  for events in events_of.values()):
            refuse("with private labels every class's release must be one histogram of the same multiplier, K and n")
        epsilon, delta, accountant = claims[0]
    else:  # parallel composition: the worst class's claim (the first of the largest, as the run wrote it)
        worst = max(range(len(claims)), key=lambda i: (claims[i][0], -i))
        epsilon, accountant = claims[worst][0], claims[worst][2]
        delta = max(c[1] for c in claims)
    _check_claim(report, epsilon, delta, accountant, refuse)


def verify_releases(report, theta: torch.Tensor, sigma: torch.Tensor, *, release, released: torch.Tensor | None = None,
                    noisy_counts: torch.Tensor | None = None, smoothing_std: float | None = None,
                    source: str = "model.h5") -> None:
    """Check what a flow recorded against ``report``, from the recorded arrays, not from the report's labels.

    ``release``: the kind of release the report's method makes (:class:`swflow.methods.releases.Release`: its
    ``per_step``, ``of_counts`` and ``local``); it must be the kind the ledger records. ``theta`` (steps, d, k),
    ``sigma`` (steps,) and ``released`` (steps, k, L): the recorded directions, σ and released sketches of each
    step; ``noisy_counts`` (K, B): a histogram's release, required whenever the ledger holds a histogram event, and
    χ²-tested; the quantile tables the replay reads are recomputed from those counts and σ and must be the
    recorded ones. ``smoothing_std``: the flow's particle-side smoothing (a local release smooths with its σ)."""
    if not report.private:
        return
    if report.conditional is not None:
        raise ClaimMismatch(f"{source} belongs to one flow, but its privacy report describes a conditional run")
    events = [MechanismEvent(**e) for e in report.ledger]
    main = events[0]
    histogram = main.sensitivity_bound == "histogram"
    if histogram != bool(release.of_counts) or (release.per_step and main.count != len(sigma)) or (
            not release.per_step and main.count != 1):
        raise ClaimMismatch(f"{source}: the run is labelled {report.method!r}, but its ledger records "
                            f"{main.count} release(s) bounded by {main.sensitivity_bound!r}, which that method does "
                            "not make: the report was edited; regenerate the run")
    if histogram:
        if noisy_counts is None:
            raise ClaimMismatch(f"{source} holds no released counts for this histogram run: it was written by "
                                "another swflow version or edited; regenerate the run")
        verify_counts(report, noisy_counts, source=source)
        if released is not None:
            check_tables(report, noisy_counts, released, source)
    if release.local and smoothing_std is not None and not _close(smoothing_std, main.noise_std):
        raise ClaimMismatch(f"{source}: the flow deconvolves noise of std {smoothing_std:.6g}, but the report claims "
                            f"the rows were released with std {main.noise_std:.6g}: the file was edited; regenerate "
                            "the run")
    if not release.per_step:
        expected = 0.0 if (histogram or release.local) else main.noise_std
        off = [t for t in range(len(sigma)) if not _close(float(sigma[t]), expected, 1e-4)]
        if off:
            raise ClaimMismatch(f"{source}: step {off[0]} was recorded with noise std {float(sigma[off[0]]):.6g}, but "
                                f"the release the report claims has {expected:.6g}: the file was edited; regenerate "
                                "the run")
        return
    if len(sigma) != sum(e.count for e in events):
        raise ClaimMismatch(f"{source} records {len(sigma)} releases but the privacy report accounts for "
                            f"{sum(e.count for e in events)}: regenerate the run")
    event = events[-1]
    factor = adjacency_factor(report.adjacency, report.norm_bound)
    for t in range(len(sigma)):
        if event.sensitivity_bound == "spectral":
            expected = event.noise_multiplier * factor * math.sqrt(spectral_bound(theta[t].double()))
        else:
            expected = event.noise_std
        # the recorded directions are float32: allow their rounding
        if not _close(float(sigma[t]), expected, 1e-4):
            raise ClaimMismatch(f"{source}: step {t} was recorded with noise std {float(sigma[t]):.6g}, but the "
                                f"calibrated mechanism adds {expected:.6g}: the file was edited; regenerate the run")


def verify_adapted_decoder(report, *, adapted: bool, source: str) -> None:
    """A decoder trained on private images is an output of a DP-SGD release: it is used only when the ledger holds
    that release (``adapted``: the run or the saved Synthesizer carries such a decoder)."""
    ledgers = [report.ledger] if report.conditional is None else list(report.conditional["ledgers"].values())
    dp_sgd = any(isinstance(e, dict) and e.get("sensitivity_bound") == ADAPT_BOUND for ledger in ledgers
                 for e in ledger)
    if adapted and not dp_sgd:
        raise ClaimMismatch(f"{source} carries a decoder adapted to private images, but its ledger holds no DP-SGD "
                            "release: the report was edited; regenerate the run")


def read_verified_report(run_dir, *, what: str = "a swflow run directory"):
    """The PrivacyReport of a run directory's privacy.json, re-derived from its ledger (:func:`verify_report`) and
    checked against the decoder the run carries; refused with a clear error when it is not readable or does not
    follow. What evaluate and compare report, and what sample passes on."""
    import json
    from pathlib import Path

    from .report import PrivacyReport

    path = Path(run_dir) / "privacy.json"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: is {run_dir} {what}?")
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise ValueError("it is not a JSON object")
        report = PrivacyReport.from_json(data)
        if not isinstance(report.run_config, dict):
            raise ValueError("its run_config is not an object")
    except (ValueError, TypeError, KeyError) as err:
        raise ValueError(f"{path} is not a readable privacy report ({type(err).__name__}: {err}); regenerate the "
                         "run") from None
    verify_report(report, source=str(path))
    adapted = report.run_config.get("decoder") == "adapted" or (Path(run_dir) / "decoder.pt").exists()
    verify_adapted_decoder(report, adapted=adapted, source=str(path))
    return report


