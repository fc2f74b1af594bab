"""A saved table run's ledger, derived again from its settings: what binds every label in the file to a release.

The calibration of a table run is deterministic: its settings (target ε or multiplier, δ, adjacency, the noise, the
shares, the unit's bound), its public n, the pairs and the columns whose cells it released fix every release's
multiplier, K, sensitivity, δ and order. On load the ledger those settings give is built again here, without any
data, and the saved ledger must be it, event for event. So a file whose cells are relabelled 'public' (the trees'
and values' events then match nothing), whose adjacency is changed with a made-up count of records, whose values
event is dropped or its δ shrunk, or one σ scaled, is refused. What no file can prove (an edit of every setting and
every count at once, consistently) is what a signature answers (swflow.io.signing).
"""
from __future__ import annotations

import math

__all__ = ["check_ledger", "expected_ledger", "noise_check"]

#: the relative tolerance on a derived multiplier or δ (the calibration is the same code on the same numbers)
_RTOL = 1e-6


def expected_ledger(syn, dataset_size: int) -> list[dict]:
    """The events (dicts of MechanismEvent fields) that a fit of ``syn`` (a TableSynthesizer whose cells and pairs are
    restored) makes on ``dataset_size`` records, in the ledger's order: the pair tables, [the repeated values,]
    [the trees of the released columns,] [the count of records, under add-remove,] [a private choice of pairs]."""
    from ..privacy.histogram import histogram_sensitivity
    from ..privacy.selection import score_sensitivity
    from ..privacy.size import size_event
    from ..tables.resolution import tree_of

    released = list(getattr(syn, "_released_columns", None) or [])
    k = syn._contribution
    spent = (size_event(syn.privacy, dataset_size, contribution=k),) if syn.privacy.adjacency == "add-remove" else ()
    fine, pairs, chosen = syn._calibrate(dataset_size, released, spent)
    named_cal, trees_cal = fine if fine is not None else (None, None)

    def event(calibration, groups: int, contribution: int, delta: float = 0.0) -> dict:
        sensitivity = histogram_sensitivity(groups, adjacency=syn.privacy.adjacency, contribution=contribution).value
        return {"noise_multiplier": calibration.noise_multiplier, "sensitivity": sensitivity,
                "noise_std": calibration.noise_multiplier * sensitivity, "n_projections": groups,
                "contribution": contribution, "delta_sensitivity": delta}

    events = [event(pairs, len(syn.pairs), k)]
    if named_cal is not None:
        named = syn._named_columns(released)
        events.append(event(named_cal, len(named) * syn._values_per_unit(), 1, syn._values_delta()))
    if trees_cal is not None:
        events.append(event(trees_cal, sum(tree_of(syn.schema.columns[j]).levels for j in released), k))
    events += [{field: getattr(e, field) for field in ("noise_multiplier", "sensitivity", "noise_std", "n_projections",
                                                       "contribution", "delta_sensitivity")} for e in spent]
    if chosen is not None:  # a private choice of pairs, last (swflow/pipeline/table_choice.py)
        choice = syn._selection.event(chosen, score_sensitivity(dataset_size))
        events.append({field: getattr(choice, field) for field in (
            "noise_multiplier", "sensitivity", "noise_std", "n_projections", "contribution", "delta_sensitivity",
            "count", "mechanism", "sensitivity_bound")})
    common = {"sensitivity_bound": "histogram", "sampling": "none", "count": 1, "mechanism": syn.privacy.count_noise,
              "dataset_size": dataset_size, "sample_size": dataset_size}
    return [{**common, **e} for e in events]


def check_ledger(syn, report, source: str) -> None:
    """Refuse ``report`` (a table run's PrivacyReport) unless its method, target, n, adjacency and δ are ``syn``'s
    settings' and its ledger is, event for event, the one they give (:func:`expected_ledger`)."""
    from ..privacy.verify import ClaimMismatch

    def refuse(what: str):
        raise ClaimMismatch(f"{source}: {what}; its settings and its releases disagree: the file was edited. Fit again "
                            "(nothing was sampled)")

    if report.method != syn.method or report.target_epsilon != syn.privacy.epsilon or (
            report.run_config.get("dataset_size") != report.dataset_size):
        refuse("its privacy report is not that of its settings (method, target epsilon or n)")
    if not report.private:
        return
    if report.adjacency != syn.privacy.adjacency:
        refuse(f"its report says {report.adjacency!r}, its settings {syn.privacy.adjacency!r}")
    if not math.isclose(report.delta, syn.privacy.delta, rel_tol=_RTOL):
        refuse(f"its report claims delta = {report.delta}, its settings {syn.privacy.delta}")
    expected = expected_ledger(syn, report.dataset_size)
    if len(report.ledger) != len(expected):
        refuse(f"its ledger holds {len(report.ledger)} releases, its settings make {len(expected)}")
    for at, (saved, derived) in enumerate(zip(report.ledger, expected), start=1):
        for field, value in derived.items():
            ok = (math.isclose(saved.get(field, math.nan), value, rel_tol=_RTOL, abs_tol=1e-300)
                  if isinstance(value, float) else saved.get(field, 1 if field == "contribution" else None) == value)
            if not ok:
                refuse(f"its release {at} records {field} = {saved.get(field)!r}, where its settings give {value!r}")


def noise_check(syn) -> str:
    """What a read-back can test of each of a fitted or loaded ``syn``'s releases, in the ledger's order; the pair
    tables' part first (its "UNTESTED" is what ``swflow sample`` warns of)."""
    from ..privacy.counts import noise_check_note

    parts = [f"pair tables: {noise_check_note(syn.codec.sizes, syn.pairs, unit_weighted=syn.unit is not None)}"]
    if getattr(syn, "_atoms", None):
        parts.append("repeated values: each named value's noisy count is tested against the threshold its sigma and "
                     "delta set (an edited count, or a delta claimed smaller, is refused); the values left unnamed "
                     "cannot be tested")
    if getattr(syn, "_released_columns", None):
        parts.append("one-way trees: chi-square of each tree's levels against their own sums"
                     + ("" if syn.privacy.adjacency == "add-remove" else " and n") + " at the claimed sigma")
    if syn.privacy.adjacency == "add-remove":
        parts.append("count of records: one noisy number, which no read-back can test; its sigma is derived again "
                     "from the settings")
    if getattr(syn, "_selection", None) is not None:
        parts.append("the private choice of pairs: which pairs it chose cannot be tested; its rounds, candidates and "
                     "Gumbel scale are derived again from the settings")
    parts.append("every release's multiplier, K, sensitivity and delta are derived again from the run's settings on "
                 "load and must be the ledger's")
    return "; ".join(parts)
