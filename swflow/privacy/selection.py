"""A private choice of pairs of columns: the exponential mechanism on each pair's dependence, R rounds at once.

A wide table cannot afford every pair's table (σ grows as √K), and the schema alone cannot say which pairs hold
their columns' links. Here the private rows say, privately, the way MST picks its tree and AIM its marginals. Each
candidate pair (a, b) is scored by how far its exact two-way table T is from the product of its own margins,

    u(a, b) = ‖T − T_a ⊗ T_b / n‖₁   (records),

and R pairs are kept: Gumbel noise of scale β = 2Δ/ε₀ added to every score, the R largest kept. That is the law of
R rounds of the exponential mechanism, each picking one remaining pair with probability ∝ exp(ε₀·u / (2Δ))
(the Gumbel-max trick; Durfee & Rogers 2019, "one-shot top-k"). Each round is ε₀-DP and, as a bounded-range
mechanism, (ε₀²/8)-zCDP (Cesar & Rogers 2021), so the R rounds are recorded as one ledger event of multiplier
2/ε₀ (its ρ = 1/(2·multiplier²), a Gaussian's of the same multiplier) whose dp-accounting event is
ZCDpEvent(ε₀²/8), composed R times with the run's Gaussian releases by dp-accounting's RDP.

Sensitivity, replace-one, n public: a changed record moves T by 2 in ℓ1 and each margin by 2, so the product of
the margins over n moves by at most (2n + 2n + 4)/n, and u by at most SCORE_SENSITIVITY(n) = 6 + 4/n (reverse
triangle inequality; tests/test_table_selection.py checks it over every replacement of small tables). Only
replace-one is covered: under add-remove n is private, and under a privacy unit a unit moves several rows.

The uniforms come from the run's privacy stream; the Gumbel noise is computed in float64, as the peers do (a
floating-point exponential mechanism, not an exact sampler).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["SELECTION_BOUND", "SELECTION_SHARE", "MAX_SCALE_SHARE", "dependence_scores", "score_sensitivity",
           "choose", "round_epsilon"]

#: the ledger's name for the score's sensitivity bound
SELECTION_BOUND = "pair dependence ||T - T_a x T_b / n||_1, replace-one: 6 + 4/n"
#: the share of the run's ρ the choice spends (MST spends a third on its tree; a tenth keeps most for the tables)
SELECTION_SHARE = 0.1
#: the choice is made only where its Gumbel scale is at most this share of n: a pair whose table departs from its
#: margins by a total variation of 0.05 (a score of 0.1·n) then stands out by one scale; past it the schema's
#: neighbours are the better guess, and the budget stays with the tables
MAX_SCALE_SHARE = 0.1


def score_sensitivity(dataset_size: int) -> float:
    """Δ of :func:`dependence_scores` under replace-one with n = ``dataset_size`` public (module docstring)."""
    if dataset_size < 1:
        raise ValueError(f"dataset_size must be >= 1, got {dataset_size}")
    return 6.0 + 4.0 / dataset_size


def dependence_scores(tables: list[Tensor], dataset_size: int) -> Tensor:
    """u = ‖T − T_a ⊗ T_b / n‖₁ for each exact two-way table T (shape (sizes[a], sizes[b])), n = ``dataset_size``.

    Returns a (len(tables),) float64 tensor."""
    out = torch.empty(len(tables), dtype=torch.float64)
    for k, table in enumerate(tables):
        table = table.to(torch.float64)
        product = torch.outer(table.sum(1), table.sum(0)) / dataset_size
        out[k] = (table - product).abs().sum()
    return out


def round_epsilon(multiplier: float) -> float:
    """ε₀ of one round recorded with ``multiplier`` (2/ε₀)."""
    return 2.0 / multiplier


def choose(scores: Tensor, rounds: int, *, multiplier: float, sensitivity: float, uniforms: Tensor) -> list[int]:
    """The indices of the ``rounds`` candidates kept, in the order of their noisy scores: ``scores`` (P,) plus
    Gumbel noise of scale β = ``multiplier`` · ``sensitivity`` (= 2Δ/ε₀), from ``uniforms`` (P,) in (0, 1) (the
    privacy stream's)."""
    if scores.ndim != 1 or uniforms.shape != scores.shape:
        raise ValueError(f"scores and uniforms must be (P,), got {tuple(scores.shape)} and {tuple(uniforms.shape)}")
    if not 1 <= rounds <= len(scores):
        raise ValueError(f"rounds must be between 1 and the {len(scores)} candidates, got {rounds}")
    if not (multiplier > 0 and sensitivity > 0 and math.isfinite(multiplier * sensitivity)):
        raise ValueError(f"need a positive, finite multiplier and sensitivity, got {multiplier}, {sensitivity}")
    gumbel = -torch.log(-torch.log(uniforms.to(torch.float64)))
    noisy = scores.to(torch.float64) + multiplier * sensitivity * gumbel
    return noisy.topk(rounds).indices.tolist()
