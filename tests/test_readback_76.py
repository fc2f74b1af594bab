"""Issue 76, items 1 and 2: every label of a saved table run bound to what was released.

Each forgery below is one an outside review made to pass: it edits a saved run and then restates ε, δ, the
accountant, the derived fields and the statement with the library's own functions, so that the privacy report is
self-consistent. The ledger derived again from the file's settings (swflow/pipeline/table_measurements.py) refuses it.
"""
from __future__ import annotations

import copy
import math
from dataclasses import replace

import pytest
import torch

from swflow.pipeline.tables import TableSynthesizer
from swflow.privacy.verify import ClaimMismatch


@pytest.fixture(scope="module")
def saved(saved_table_runs):
    """{adjacency: the blob of a saved run with a repeated-values release, trees and pair tables} (conftest)."""
    return {adjacency: blob for adjacency, (_, blob) in saved_table_runs.items()}


def _reclaim(blob, *, retarget: bool = True) -> None:
    """Restate the report's claim from its (edited) ledger as the library computes it, and (``retarget``) its target
    with it: a report that verify_report alone accepts."""
    from swflow.privacy import PrivacyReport
    from swflow.privacy.accountants import accountant_for, epsilon_from_events
    from swflow.privacy.ledger import MechanismEvent
    from swflow.privacy.report import statement, unit_of

    report = PrivacyReport.from_json(blob["report"])
    events = tuple(MechanismEvent(**e) for e in report.ledger)
    epsilon = epsilon_from_events(events, delta=report.delta_accountant, adjacency=report.adjacency)
    delta = report.delta_accountant + sum(e.count * e.delta_sensitivity for e in events)
    accountant = accountant_for(events, adjacency=report.adjacency).name
    main = events[0]
    target = epsilon if retarget else report.target_epsilon
    report = replace(report, epsilon=epsilon, delta=delta, accountant=accountant, target_epsilon=target,
                     noise_multiplier=main.noise_multiplier, noise_std=main.noise_std, sensitivity=main.sensitivity,
                     n_projections=main.n_projections, dataset_size=main.dataset_size,
                     sample_rate=main.sample_size / main.dataset_size, mechanism=main.mechanism,
                     steps=sum(e.count for e in events),
                     delta_sensitivity=sum(e.count * e.delta_sensitivity for e in events),
                     run_config={**report.run_config, "dataset_size": main.dataset_size})
    blob["report"] = replace(report, statement=statement(epsilon, delta, accountant, report.adjacency,
                                                         unit_of(report))).to_json()
    blob["privacy"]["epsilon"], blob["privacy"]["delta"] = target, delta


def _public_relabel(blob):
    blob["resolution"].update(mode="public", columns=[])
    del blob["measurements"]["repeated values"], blob["measurements"]["one-way trees"]
    del blob["report"]["ledger"][1:3]


def _legacy_fallback(blob):
    del blob["resolution"]
    del blob["measurements"]["repeated values"], blob["measurements"]["one-way trees"]
    del blob["report"]["ledger"][1:3]
    blob["report"]["ledger"][0]["noise_std"] *= 100
    blob["report"]["ledger"][0]["noise_multiplier"] *= 100


def _add_remove_relabel(blob):
    from swflow.privacy.histogram import histogram_sensitivity

    blob["privacy"]["adjacency"] = blob["report"]["adjacency"] = "add-remove"
    for event in blob["report"]["ledger"]:
        event["sensitivity"] = histogram_sensitivity(event["n_projections"], adjacency="add-remove").value
        event["noise_multiplier"] = event["noise_std"] / event["sensitivity"]
    n = blob["report"]["dataset_size"]
    blob["report"]["ledger"].append({**blob["report"]["ledger"][0], "n_projections": 1, "sensitivity": 1.0,
                                     "noise_std": 50.0, "noise_multiplier": 50.0, "measurement": "count of records"})
    blob["measurements"]["count of records"] = float(n)


def _values_dropped(blob):
    del blob["measurements"]["repeated values"]
    del blob["report"]["ledger"][1]


def _values_delta_shrunk(blob):
    blob["report"]["ledger"][1]["delta_sensitivity"] = 1e-30


def _pairs_noise_scaled(blob):
    for key in ("noise_std", "noise_multiplier"):
        blob["report"]["ledger"][0][key] *= 1.5


def _size_noise_scaled(blob):
    for key in ("noise_std", "noise_multiplier"):
        blob["report"]["ledger"][-1][key] *= 100


def _resolution_share_changed(blob):
    blob["resolution"]["share"] = 0.5


FORGERIES = {"cells relabelled public, their releases dropped": ("replace-one", _public_relabel),
             "the resolution key deleted (legacy path), sigma x 100": ("replace-one", _legacy_fallback),
             "replace-one relabelled add-remove with a made-up count": ("replace-one", _add_remove_relabel),
             "the values event dropped with its values": ("replace-one", _values_dropped),
             "the values event's delta claimed 1e-30": ("replace-one", _values_delta_shrunk),
             "the pair tables' sigma x 1.5": ("replace-one", _pairs_noise_scaled),
             "the count of records' sigma x 100": ("add-remove", _size_noise_scaled),
             "the resolution share edited": ("replace-one", _resolution_share_changed)}


@pytest.mark.parametrize("name", list(FORGERIES))
def test_a_restated_forgery_of_a_saved_table_run_is_refused(saved, tmp_path, name):
    adjacency, edit = FORGERIES[name]
    blob = copy.deepcopy(saved[adjacency])
    edit(blob)
    _reclaim(blob)
    torch.save(blob, tmp_path / "model.pt")
    with pytest.raises(ClaimMismatch):
        TableSynthesizer.load(tmp_path / "model.pt")


@pytest.mark.parametrize("adjacency", ["replace-one", "add-remove"])
def test_an_untouched_run_restated_by_the_same_functions_still_loads(saved, tmp_path, adjacency):
    """The forgeries' helper changes nothing by itself: what refuses them is their edit."""
    blob = copy.deepcopy(saved[adjacency])
    _reclaim(blob, retarget=False)
    torch.save(blob, tmp_path / "model.pt")
    report = TableSynthesizer.load(tmp_path / "model.pt").privacy_report()
    assert math.isclose(report.epsilon, 1.0, rel_tol=1e-3)


def test_the_derived_ledger_is_the_fit_s_own(saved):
    """Independent of the loader: the settings' ledger equals, field by field, what the fit recorded."""
    from swflow.pipeline.table_measurements import MEASUREMENTS, plan

    for adjacency, blob in saved.items():
        syn = TableSynthesizer.load("saved", blob=copy.deepcopy(blob))  # the loader restores the cells
        derived = plan(syn, blob["report"]["dataset_size"])
        assert [m.name for m in derived] == [n for n in MEASUREMENTS if n not in ("choice of pairs",
                                                                                  "target's tables")][
            :None if adjacency == "add-remove" else 3]
        for saved_event, measurement in zip(blob["report"]["ledger"], derived, strict=True):
            for field, value in measurement.event.items():
                expected = value if isinstance(value, str) else pytest.approx(value, rel=1e-9)
                assert saved_event[field] == expected, (adjacency, field)
