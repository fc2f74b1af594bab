"""A table run's releases as named measurements: what each counts, its sensitivity and its noise.

A table run makes at most six releases of its private rows, each a :class:`Measurement` with a name, in the
ledger's order:

==================  ==========================================================  =====================================
name                what it counts                                              made
==================  ==========================================================  =====================================
pair tables         the two-way tables of the column pairs (MarginalTarget)     by every private run
target's tables     a named target's pair tables, at a share of their budget    where they are few (table_pairs.py)
repeated values     the counts of the values a sliced column's records share    with a resolution release that names
                                                                                values (ValuesTarget)
one-way trees       the fine one-way trees of the columns whose cells it sets   with a resolution release (OneWayTarget)
count of records    n, once, before anything else                               under add-remove (privacy/size.py)
choice of pairs     rounds of the exponential mechanism choosing pairs          on a wide table (table_choice.py)
==================  ==========================================================  =====================================

:func:`plan` derives each one from the run's settings (target ε or multiplier, δ, adjacency, the noise, the
shares, the unit's bound), its public n, its pairs and the columns whose cells it released, without any data: its
multiplier, K, sensitivity, noise std, δ and mechanism. The fit checks that its ledger is that plan and names each
event after its measurement (privacy.json's ``measurement``); a load derives the plan again and refuses a file whose
ledger is not it, event for event (:func:`check_ledger`), so a file whose cells are relabelled 'public', whose
adjacency is changed with a made-up count of records, whose values event is dropped or its δ shrunk, or one σ
scaled, is refused. Every reader finds a release by its name (:func:`released`), never by its place. What no file
can prove (an edit of every setting and every count at once, consistently) is what a signature answers
(swflow.io.signing).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

__all__ = ["Measurement", "MEASUREMENTS", "PAIR_TABLES", "TARGET_TABLES", "REPEATED_VALUES", "ONE_WAY_TREES",
           "RECORD_COUNT", "PAIR_CHOICE", "plan", "name_releases", "released_numbers", "read_numbers", "named_ledger",
           "released", "check_ledger", "noise_check", "without_names"]

PAIR_TABLES, TARGET_TABLES = "pair tables", "target's tables"
REPEATED_VALUES, ONE_WAY_TREES = "repeated values", "one-way trees"
RECORD_COUNT, PAIR_CHOICE = "count of records", "choice of pairs"
#: every measurement a table run can make, in the ledger's order
MEASUREMENTS = (PAIR_TABLES, TARGET_TABLES, REPEATED_VALUES, ONE_WAY_TREES, RECORD_COUNT, PAIR_CHOICE)

#: the relative tolerance on a derived multiplier or δ (the calibration is the same code on the same numbers)
_RTOL = 1e-6
#: the fields of a ledger event that each release sets (the rest are common to a table run's: ``common`` in plan)
_FIELDS = ("noise_multiplier", "sensitivity", "noise_std", "n_projections", "contribution", "delta_sensitivity")


@dataclass(frozen=True)
class Measurement:
    """One release of a table run: its ``name`` (MEASUREMENTS), what it ``counts`` (words for the report), its
    ledger ``event`` (the MechanismEvent fields its settings give) and what a read-back of the saved file can test
    of it (``readback``)."""

    name: str
    counts: str
    event: dict
    readback: str


def plan(syn, dataset_size: int) -> list[Measurement]:
    """The measurements that a fit of ``syn`` (a TableSynthesizer whose cells and pairs are set or restored) makes on
    ``dataset_size`` records, in the ledger's order; none for a run without privacy."""
    from ..privacy.counts import noise_check_note
    from ..privacy.histogram import histogram_sensitivity
    from ..privacy.selection import score_sensitivity
    from ..privacy.size import size_event
    from ..tables.resolution import tree_of

    if not syn.privacy.private:
        return []
    released_columns = list(getattr(syn, "_released_columns", None) or [])
    k, adjacency = syn._contribution, syn.privacy.adjacency
    spent = (size_event(syn.privacy, dataset_size, contribution=k),) if adjacency == "add-remove" else ()
    fine, (pairs, apart), chosen = syn._calibrate(dataset_size, released_columns, spent)
    named_cal, trees_cal = fine if fine is not None else (None, None)
    common = {"sensitivity_bound": "histogram", "sampling": "none", "count": 1, "mechanism": syn.privacy.count_noise,
              "dataset_size": dataset_size, "sample_size": dataset_size}

    def event(name: str, calibration, groups: int, contribution: int, delta: float = 0.0) -> dict:
        sensitivity = histogram_sensitivity(groups, adjacency=adjacency, contribution=contribution).value
        return {**common, "noise_multiplier": calibration.noise_multiplier, "sensitivity": sensitivity,
                "noise_std": calibration.noise_multiplier * sensitivity, "n_projections": groups,
                "contribution": contribution, "delta_sensitivity": delta, "measurement": name}

    together = len(syn.pairs) - sum(syn._apart())
    out = [Measurement(PAIR_TABLES, f"the two-way tables of {together} column pairs", event(PAIR_TABLES, pairs,
                       together, k), noise_check_note(syn.codec.sizes, syn.pairs, unit_weighted=syn.unit is not None)
                       + (" (with the target's tables, each table at its own sigma)" if apart is not None else ""))]
    out += [] if apart is None else [_target_tables(syn, event(TARGET_TABLES, apart, len(syn.pairs) - together, k))]
    if named_cal is not None:
        named = syn._named_columns(released_columns)
        out.append(Measurement(
            REPEATED_VALUES, f"the values that the records of {len(named)} sliced columns share, each named value's "
                             "count", event(REPEATED_VALUES, named_cal, len(named) * syn._values_per_unit(), 1,
                                            syn._values_delta()),
            "each named value's noisy count is tested against the threshold its sigma and delta set (an edited "
            "count, or a delta claimed smaller, is refused); the values left unnamed cannot be tested"))
    if trees_cal is not None:
        levels = sum(tree_of(syn.schema.columns[j]).levels for j in released_columns)
        out.append(Measurement(
            ONE_WAY_TREES, f"the fine one-way trees of {len(released_columns)} columns ({levels} levels)",
            event(ONE_WAY_TREES, trees_cal, levels, k), "chi-square of each tree's levels against their own sums"
            + ("" if adjacency == "add-remove" else " and n") + " at the claimed sigma"))
    for e in spent:
        out.append(Measurement(RECORD_COUNT, "the number of records, released first (add-remove: n is private)",
                               {**common, **{f: getattr(e, f) for f in _FIELDS}, "measurement": RECORD_COUNT},
                               "one noisy number, which no read-back can test; its sigma is derived again from the "
                               "settings"))
    if chosen is not None:  # a private choice of pairs, last (swflow/pipeline/table_choice.py)
        choice = syn._selection.event(chosen, score_sensitivity(dataset_size))
        out.append(Measurement(
            PAIR_CHOICE, f"{choice.count} rounds of the exponential mechanism choosing pairs among "
                         f"{choice.n_projections} candidates by their dependence",
            {**common, **{f: getattr(choice, f) for f in (*_FIELDS, "count", "mechanism", "sensitivity_bound")},
             "measurement": PAIR_CHOICE},
            "which pairs it chose cannot be tested; its rounds, candidates and Gumbel scale are derived again from "
            "the settings"))
    return out


def _target_tables(syn, event: dict) -> Measurement:
    """The target's tables released apart (swflow/pipeline/table_pairs.py), whose ledger ``event`` is given."""
    return Measurement(TARGET_TABLES, f"the two-way tables of the target {syn.flow.target!r} with each of the other "
                                      f"{event['n_projections']} columns, at {syn._target_share():g} of the pair "
                                      "tables' budget", event, "tested with the pair tables, in one chi-square")


def _differences(ledger: list[dict], planned: list[Measurement]) -> str | None:
    """What first tells ``ledger`` (saved or just made) apart from the ``planned`` releases; None where it is them."""
    if len(ledger) != len(planned):
        return f"its ledger holds {len(ledger)} releases, its settings make {len(planned)}"
    for at, (saved, measurement) in enumerate(zip(ledger, planned), start=1):
        for field, value in measurement.event.items():
            ok = (math.isclose(saved.get(field, math.nan), value, rel_tol=_RTOL, abs_tol=1e-300)
                  if isinstance(value, float) else saved.get(field, 1 if field == "contribution" else None) == value)
            if not ok:
                return f"its release {at} records {field} = {saved.get(field)!r}, where its settings give {value!r}"
    return None


def name_releases(report, planned: list[Measurement]):
    """A fit's ``report`` with every ledger event named after its measurement; a fit whose releases are not the
    ones its settings plan is a fault of swflow, never written."""
    ledger = [{**e, "measurement": m.name} for e, m in zip(report.ledger, planned)] + report.ledger[len(planned):]
    wrong = _differences(ledger, planned)
    if wrong is not None:
        raise RuntimeError(f"swflow's table run released other than it planned ({wrong}): please report it")
    return replace(report, ledger=ledger)


def released_numbers(syn) -> dict:
    """What model.pt keeps of each release, by its measurement's name: the released numbers (the pair tables' noisy
    counts, the target's apart where they were released apart, each named value and its count, the trees' levels,
    the count of records) and a choice's shape."""
    from .table_choice import selection_state

    values = getattr(syn, "_released_values", None)
    numbers = {**dict(zip((PAIR_TABLES, TARGET_TABLES), syn._parts_counts())),
               REPEATED_VALUES: None if values is None else [[v, c] for v, c in values],
               ONE_WAY_TREES: syn._released_levels, RECORD_COUNT: syn._size, PAIR_CHOICE: selection_state(syn)}
    return {name: number for name, number in numbers.items() if number is not None}


def read_numbers(blob: dict) -> dict:
    """model.pt's released numbers by measurement (:func:`released_numbers`); a file of an earlier swflow kept them
    under keys of their own."""
    if "measurements" in blob:
        numbers = dict(blob["measurements"])
        if not set(numbers) <= set(MEASUREMENTS) or PAIR_TABLES not in numbers:
            raise ValueError(f"its releases {sorted(numbers)} are not measurements swflow makes {MEASUREMENTS}")
        return numbers
    resolution = blob.get("resolution") or {}
    numbers = {PAIR_TABLES: blob["noisy_counts"], REPEATED_VALUES: resolution.get("repeated_values"),
               ONE_WAY_TREES: resolution.get("levels"), RECORD_COUNT: blob.get("size"),
               PAIR_CHOICE: blob.get("selection")}
    return {name: number for name, number in numbers.items() if number is not None}


def named_ledger(report, numbers: dict, source: str):
    """A loaded ``report`` whose ledger events carry their names: as saved, or, for a file written before releases
    were named, the names of the releases whose ``numbers`` it keeps, in the ledger's order. Refused where its
    ledger and its numbers name different releases."""
    from ..privacy.verify import ClaimMismatch

    if not report.private:
        return report
    if not all("measurement" in e for e in report.ledger):
        names = [name for name in MEASUREMENTS if name in numbers]
        if len(names) == len(report.ledger) and not any("measurement" in e for e in report.ledger):
            report = replace(report, ledger=[{**e, "measurement": name} for e, name in zip(report.ledger, names)])
    if sorted(e.get("measurement") or "" for e in report.ledger) != sorted(numbers):
        raise ClaimMismatch(f"{source}: its ledger records the releases "
                            f"{[e.get('measurement') for e in report.ledger]}, its released numbers are those of "
                            f"{sorted(numbers)}: the file was edited; fit again")
    return report


def released(report, name: str, source: str) -> dict:
    """The ledger event of ``report``'s measurement ``name``, refused where the ledger holds none or several."""
    from ..privacy.verify import ClaimMismatch

    found = [e for e in report.ledger if e.get("measurement") == name]
    if len(found) != 1:
        raise ClaimMismatch(f"{source}: its ledger holds {len(found)} releases of the {name}, where its saved "
                            "state needs one: the file was edited; fit again")
    return found[0]


def without_names(ledger: list[dict]) -> list[dict]:
    """A ledger as files of an earlier swflow wrote it: its events without their names."""
    return [{k: v for k, v in e.items() if k != "measurement"} for e in ledger]


def check_ledger(syn, report, source: str) -> list[Measurement]:
    """The measurements of ``syn``'s settings, after refusing ``report`` (a table run's PrivacyReport) unless its
    method, target, n, adjacency and δ are those settings' and its ledger is, event for event and name for name,
    their plan (:func:`plan`)."""
    from ..privacy.verify import ClaimMismatch

    def refuse(what: str):
        raise ClaimMismatch(f"{source}: {what}; its settings and its releases disagree: the file was edited. Fit again "
                            "(nothing was sampled)")

    if report.method != syn.method or report.target_epsilon != syn.privacy.epsilon or (
            report.run_config.get("dataset_size") != report.dataset_size):
        refuse("its privacy report is not that of its settings (method, target epsilon or n)")
    if not report.private:
        return []
    if report.adjacency != syn.privacy.adjacency:
        refuse(f"its report says {report.adjacency!r}, its settings {syn.privacy.adjacency!r}")
    if not math.isclose(report.delta, syn.privacy.delta, rel_tol=_RTOL):
        refuse(f"its report claims delta = {report.delta}, its settings {syn.privacy.delta}")
    planned = plan(syn, report.dataset_size)
    wrong = _differences(report.ledger, planned)
    if wrong is not None:
        refuse(wrong)
    return planned


def noise_check(planned: list[Measurement]) -> str:
    """What a read-back can test of each measurement, in the ledger's order (the pair tables' part first: its
    "UNTESTED" is what ``swflow sample`` warns of)."""
    parts = [f"{m.name}: {m.readback}" for m in planned]
    parts.append("every release's multiplier, K, sensitivity and delta are derived again from the run's settings on "
                 "load and must be the ledger's")
    return "; ".join(parts)
