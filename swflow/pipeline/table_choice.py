"""A wide table's pairs chosen privately (issue 94): a spine the schema gives, and as many again chosen by the data.

Past MAX_SCHEMA_PAIRS pairs a table releases some pairs only. Without public rows the schema gives a spine that puts
every column in a table: the target's pairs with every column where a target is named, else each column with the
next one. Beside it the run chooses as many pairs again (R = C − 1) among the others by the private rows' own
dependence, with the exponential mechanism (swflow.privacy.selection) at SELECTION_SHARE of the budget's ρ: about
2(C − 1) tables in all, where the schema's neighbours took about 496. The choice is made where its Gumbel scale is
at most MAX_SCALE_SHARE of n (replace-one, no privacy unit, one process); elsewhere the neighbours are kept and the
whole budget goes to the tables. Every term of that rule is public: n, ε, δ, the schema.
"""
from __future__ import annotations

import itertools

__all__ = ["selection_plan", "choose_pairs_privately", "choice_note", "plan_choice", "make_choice", "compose_choice",
           "selection_state", "restore_selection", "schema_note"]

#: the most cells counted at once while scoring the candidates (float64: 32 MiB)
BATCH_CELLS = 1 << 22


def schema_note(syn, *, given: bool, target: str | None) -> str:
    """What chose the pairs, in words (privacy.json; said at run time where it is not every pair)."""
    from ..tables.pairs import MAX_SCHEMA_PAIRS, MAX_TABLE_CELLS

    columns = len(syn.schema.columns)
    every = columns * (columns - 1) // 2
    if given or len(syn.pairs) == every:
        return "given" if given else "every pair (the schema alone)"
    widths = syn._widths()
    width = max(j - i for i, j in syn.pairs if target not in (syn.schema.names[i], syn.schema.names[j]))
    rules = [f"each column with {'the next one' if width == 1 else f'its next {width}'} in the schema's order"
             + (f", and {target!r} (the target) with every column" if target else "")] \
        if every > MAX_SCHEMA_PAIRS else []
    if any(widths[i] * widths[j] > MAX_TABLE_CELLS for i in range(columns) for j in range(i)):
        rules.append(f"leaving out a table of more than {MAX_TABLE_CELLS:,} cells where its columns are in others")
    return (f"the schema alone: {', '.join(rules)} ({len(syn.pairs)} of the {every} pairs; "
            "swflow.tables.pairs.schema_pairs)")


def _spine(columns: int, target: int | None) -> list[tuple[int, int]]:
    """The pairs the schema gives: the target's with every column, else each column with the next."""
    if target is not None:
        return [tuple(sorted((j, target))) for j in range(columns) if j != target]
    return [(j, j + 1) for j in range(columns - 1)]


def _shape(syn) -> tuple[list[tuple[int, int]], list[tuple[int, int]], int]:
    """(the spine, the candidates off it, the rounds) that ``syn``'s schema and target give: what a fit plans and a
    load checks."""
    from ..tables.pairs import MAX_TABLE_CELLS

    columns, widths = len(syn.schema.columns), syn._widths()
    target = None if syn.flow.target is None else syn.schema.names.index(syn.flow.target)
    spine = _spine(columns, target)
    # every pair off the spine whose table the schema allows (at most MAX_TABLE_CELLS cells), in order
    candidates = [pair for pair in itertools.combinations(range(columns), 2)
                  if pair not in spine and widths[pair[0]] * widths[pair[1]] <= MAX_TABLE_CELLS]
    return spine, candidates, min(columns - 1, len(candidates))


def selection_plan(syn, n: int, *, sharded: bool):
    """(the spine, a SelectionPlan) where ``syn`` (a TableSynthesizer) chooses its pairs privately on ``n``
    records, else None (module docstring)."""
    from ..privacy.calibrate import SelectionPlan
    from ..privacy.histogram import one_release_multiplier
    from ..privacy.selection import MAX_SCALE_SHARE, SELECTION_SHARE, score_sensitivity
    from ..tables.pairs import MAX_SCHEMA_PAIRS, MAX_TABLE_CELLS

    columns, widths = len(syn.schema.columns), syn._widths()
    if (not syn.privacy.private or syn.privacy.adjacency != "replace-one" or syn.unit is not None or sharded
            or syn.public is not None or syn.pairs_chosen_by == "given"
            or columns * (columns - 1) // 2 <= MAX_SCHEMA_PAIRS):
        return None
    spine, candidates, rounds = _shape(syn)
    if not candidates or any(widths[i] * widths[j] > MAX_TABLE_CELLS for i, j in spine):
        return None  # the schema's rule leaves such tables out
    plan = SelectionPlan(rounds=rounds, candidates=len(candidates), share=SELECTION_SHARE, dataset_size=n)
    scale = plan.multiplier(one_release_multiplier(syn.privacy)) * score_sensitivity(n)
    return None if scale > MAX_SCALE_SHARE * n else (spine, plan)


def choose_pairs_privately(syn, rows, n: int, noise, multiplier: float, plan) -> list[tuple[int, int]]:
    """The spine (``syn.pairs``) and ``plan.rounds`` pairs more, chosen among the candidates by the exponential
    mechanism on the exact tables of the private ``rows`` (codec rows, a source of cells or an engine's rows), each
    round of ``multiplier`` (2/ε₀); the uniforms from the privacy stream ``noise``."""
    import torch

    from ..privacy.marginals import exact_tables, split_tables
    from ..privacy.selection import choose, dependence_scores, score_sensitivity

    spine, candidates, _ = _shape(syn)
    if spine != syn.pairs or len(candidates) != plan.candidates:
        raise RuntimeError("the pairs changed between the plan and the choice")
    sizes, blocks = syn.codec.sizes, syn.codec.blocks()
    batches, cells = [[]], 0  # the candidates' exact tables counted BATCH_CELLS cells at a time
    for i, j in candidates:
        if batches[-1] and cells + sizes[i] * sizes[j] > BATCH_CELLS:
            batches.append([])
            cells = 0
        batches[-1].append((i, j))
        cells += sizes[i] * sizes[j]
    scores = torch.cat([dependence_scores(split_tables(exact_tables(rows, blocks, batch), sizes, batch), n)
                        for batch in batches])
    kept = choose(scores, plan.rounds, multiplier=multiplier, sensitivity=score_sensitivity(n),
                  uniforms=noise.uniform(len(candidates)))
    return sorted([*spine, *(candidates[k] for k in kept)])


def choice_note(syn, plan, multiplier: float) -> str:
    """What chose the pairs, in words (privacy.json's pairs_chosen_by)."""
    from ..privacy.selection import round_epsilon

    target = syn.flow.target
    spine = (f"{target!r} (the target) with every column" if target is not None
             else "each column with the next in the schema's order")
    columns = len(syn.schema.columns)
    return (f"a private choice: {spine}, and {plan.rounds} pairs more chosen among the {plan.candidates} others by "
            f"the exponential mechanism on each pair's dependence (||T - T_a x T_b / n||_1), {plan.rounds} rounds of "
            f"epsilon_0 = {round_epsilon(multiplier):.4g}, {plan.share:g} of the budget's rho, accounted in the ledger "
            f"(swflow.privacy.selection): {len(syn.pairs)} of the {columns * (columns - 1) // 2} pairs")


def plan_choice(syn, n: int, *, sharded: bool) -> None:
    """Before the cells: where ``syn`` chooses its pairs privately, its pairs become the spine and its
    ``_selection`` the plan (its K counts the pairs still to choose); elsewhere nothing changes."""
    planned = selection_plan(syn, n, sharded=sharded)
    if planned is not None:
        syn.pairs, syn._selection = planned


def make_choice(syn, rows, n: int, noise, multiplier: float | None) -> None:
    """Once the cells are set: the choice itself (nothing without a plan)."""
    if syn._selection is None:
        return
    syn.pairs = choose_pairs_privately(syn, rows, n, noise, multiplier, syn._selection)
    syn._chosen = True
    syn.pairs_chosen_by = choice_note(syn, syn._selection, multiplier)


def compose_choice(syn, multiplier: float | None) -> None:
    """The choice's event, appended to ``syn``'s report last (its ε recomputed by RDP over every release)."""
    from dataclasses import replace

    from ..privacy import compose
    from ..privacy.selection import score_sensitivity

    if syn._selection is None:
        return
    event = syn._selection.event(multiplier, score_sensitivity(syn._selection.dataset_size))
    syn._report = replace(compose(syn._report, (event,), target_epsilon=syn.privacy.epsilon, note=(
        f"{event.count} rounds of the exponential mechanism choosing the pairs among {event.n_projections} "
        f"candidates, each of Gumbel scale {event.noise_std:.6g} on a score of sensitivity {event.sensitivity:.6g}")),
        directions=("the column pairs: the schema's spine and those the exponential mechanism chose (its rounds "
                    "are in the ledger)"))


def selection_state(syn) -> dict | None:
    """What model.pt keeps of a choice: its shape (the pairs themselves are saved with the others)."""
    plan = syn._selection
    return None if plan is None else {"rounds": plan.rounds, "candidates": plan.candidates, "share": plan.share}


def restore_selection(syn, state: dict | None, dataset_size: int, source: str) -> None:
    """A loaded run's choice, checked against its settings: the spine among its pairs, as many pairs more as rounds,
    and the rounds, candidates and share the schema gives (its event is then derived again from them and must be
    the ledger's: table_measurements.check_ledger)."""
    from ..privacy.calibrate import SelectionPlan
    from ..privacy.selection import SELECTION_SHARE
    from ..privacy.verify import ClaimMismatch

    syn._chosen = True
    if state is None:
        syn._selection = None
        return
    spine, candidates, rounds = _shape(syn)
    if (state.get("rounds"), state.get("candidates"), state.get("share")) != (rounds, len(candidates),
                                                                              SELECTION_SHARE) or \
            not set(spine) <= set(syn.pairs) or len(syn.pairs) != len(spine) + rounds:
        raise ClaimMismatch(f"{source}: its private choice of pairs is not the one its schema and settings make "
                            f"({rounds} rounds among {len(candidates)} pairs beside the spine): the file was edited; "
                            "fit again")
    syn._selection = SelectionPlan(rounds=rounds, candidates=len(candidates), share=SELECTION_SHARE,
                                   dataset_size=dataset_size)
