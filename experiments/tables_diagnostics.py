"""Diagnostics of the benchmark's misses (issue 58): what a log scale, every category its own cell, and more
noise draws would change. Settings measured here are not defaults; docs/tables-design.md ("Not done yet") reports them.

- ``log-scale``: counts and amounts declared ``"scale": "log"`` against the table as declared, at each ε and seed.
- ``every-category``: a many-category column as the defaults give it (every category its own cell, up to 256),
  against it merged into each of ``--cells`` (its largest categories but one and a cell for the rest), every other
  column at the rule's cells or at ``--others``, at each ε (ε = 1e6 is the pair tables without noise; storms' names,
  txhousing's areas).
- ``few-pairs``: a many-category column given one cell per category and released only in its pairs with ``--with``
  (every other pair kept), against the defaults, at each ε (storms' names with their years: as MST measures them).
- ``target-pairs``: only the target's pairs released (the classifier's column with every other), against every pair:
  what a run that serves one prediction task can trade (``pairs=`` in the library).
- ``shrinkage``: the released tables fitted as they are (``shrink=False``), against shrunk toward independence
  (the default): the classifier's AUC against the marginals' error, and the target's Cramér's V with every other
  column (scored at the held-out deciles), beside the private rows' and the exact tables' (ε = ∞: no noise, not
  private): where a rare class's dependences go (issue 74); and every table shrunk but the target's (``target=``).
- ``tree-pairs``: fewer pairs, chosen by an oracle: the maximum spanning tree of the private rows' pairwise mutual
  information (scored in the scorer's bins), alone and with the 2C most dependent pairs added, against every
  pair. Chosen on private rows without noise, it bounds what a private choice of pairs (MST's) could bring.
- ``repeated-values``: swflow with its defaults and with ``repeated_values`` (the private release of the values the
  sliced columns repeat: swflow/privacy/values.py), and the defaults' samples with each decoded number snapped to
  the value that the private rows repeat inside its fine slice (held by at least half the slice's rows, and by at
  least the count such a release could keep: a tenth of ρ on the sliced columns' counts, Gaussian, thresholded at
  1e-10 of δ): an oracle, never a release, that bounds what the release could add.
- ``auc-draws``: more noise draws of a table's AUC and 3-way TVD at one ε, of swflow or (``--peer``) of a peer.
- ``conditional-category``: swflow's samples, and ``--column`` drawn again inside its released cell from the private
  rows' law given the ``--with`` columns (an oracle without noise: what a release of, say, storms' names given their
  years and months could bring at most), its triples and the others apart.
- ``category-prior``: one release a draw, fitted twice: as the library does (each column's pooled counts shrunk
  toward its prior, each category alike or each stretch of a number's bounds alike,
  swflow.tables.shrinkage.shrunk_tables) and without the priors (the library before them), so the noise is the same
  on both sides; 1-way and 3-way TVD and the AUC, with each category column's
  one-way TVD.
- ``split-triples``: the 3-way TVD over the triples that hold ``--column`` and over the others, for the private rows
  (the floor), for the private rows with ``--column`` shuffled (its margin exact, its links to every other column
  cut: what a release that measures nothing of those links scores at best; not private), and for swflow or
  (``--peer``) a peer (``--seeds 0``: the benchmark's cached draw).

Each line is one fit and one draw of the noise, scored as `swflow evaluate --against` does (experiments/tables_bench.py).

    make tables-data
    python experiments/tables_diagnostics.py log-scale --table k401ksubs --columns inc nettfa --epsilons 1 10
    python experiments/tables_diagnostics.py every-category --table txhousing --column city --cells 6 21 \
        --epsilons 1
    python experiments/tables_diagnostics.py every-category --table storms --column name --others 16 --epsilons 10 1e6
    python experiments/tables_diagnostics.py few-pairs --table storms --column name --with year month --epsilons 1 10
    python experiments/tables_diagnostics.py target-pairs --table medexp --epsilons 1
    python experiments/tables_diagnostics.py shrinkage --table medexp --epsilons 1 --seeds 1 2 3 4 5 6
    python experiments/tables_diagnostics.py tree-pairs --table storms --epsilons 1 10
    python experiments/tables_diagnostics.py repeated-values --table medexp --epsilons 1 10
    python experiments/tables_diagnostics.py auc-draws --table medexp --epsilons 1 [--adjacency add-remove]
    python experiments/tables_diagnostics.py auc-draws --table medexp --epsilons 1 --peer mst
    python experiments/tables_diagnostics.py auc-draws --table hi --epsilons 1 --peer aim-privtree
    python experiments/tables_diagnostics.py split-triples --table storms --column name --epsilons 1 10 [--peer aim]
    python experiments/tables_diagnostics.py category-prior --table hsb82 --epsilons 1 --seeds 1 2 3
"""
from __future__ import annotations

import argparse
import itertools
import math
import sys
from pathlib import Path

import numpy as np

from swflow.tables.metrics import marginal_errors

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from tables_adult import Scorer  # noqa: E402
from tables_bench import (DELTA, PEERS, PRIVTREE, TARGETS, peer_codec_of, read, run_cell, swflow,  # noqa: E402
                          with_scale)

#: the benchmark's cache of the peers' samples (experiments/tables_bench.py)
PEER_CACHE = HERE / "out" / "tables_bench_peers"


def log_scale(schema, columns: list[str]):
    """``schema`` with ``columns``, numeric ones, declared ``"scale": "log"``."""
    unknown = set(columns) - {c.name for c in schema.columns if c.kind == "numeric"}
    if unknown:
        raise ValueError(f"{sorted(unknown)} are not numeric columns of the table")
    return with_scale(schema, "log", columns)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", nargs="?", default="log-scale", choices=(
        "log-scale", "every-category", "few-pairs", "target-pairs", "shrinkage", "tree-pairs", "repeated-values",
        "auc-draws", "split-triples", "conditional-category", "category-prior"))
    p.add_argument("--table", default="movies")
    p.add_argument("--column", default="name", help="every-category, few-pairs: the many-category column; "
                   "split-triples: the column whose triples are shown apart")
    p.add_argument("--columns", nargs="+", default=["votes", "budget"], help="log-scale: the columns declared log")
    p.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 10.0])
    p.add_argument("--others", type=int, help="every-category: the other columns' cells (default: the rule's)")
    p.add_argument("--cells", type=int, nargs="+", default=[6], help="every-category: the many-category column "
                   "merged into each of these numbers of cells, against every category its own (the default)")
    p.add_argument("--with", dest="partners", nargs="+", default=["year"], help="few-pairs: the columns the "
                   "many-category column is paired with; conditional-category: the columns it is drawn given")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="the noise draws' seeds (the "
                   "benchmark's is 0)")
    p.add_argument("--adjacency", choices=("replace-one", "add-remove"), default="replace-one")
    p.add_argument("--peer", choices=[*PEERS, *PRIVTREE], help="auc-draws, split-triples: draws of this peer "
                   "(equal-width bins, or PrivTree's: aim-privtree, ...) instead of swflow "
                   "(`make peers-env`; cached beside the benchmark's)")
    p.add_argument("--data-dir", default=str(HERE.parent / "data" / "tables"))
    p.add_argument("--smoke", action="store_true", help="the made-up example table, eps 5, one seed (CI)")
    args = p.parse_args(argv)
    if args.peer and args.what not in ("auc-draws", "split-triples"):
        p.error("--peer is for auc-draws and split-triples")
    if args.smoke:
        from swflow.tables import example_table

        (private, schema), (held_out, _) = example_table(1000, seed=0), example_table(1000, seed=1)
        target, args.epsilons, args.seeds = "income", [5.0], [1]
        args.column, args.columns, args.partners, args.peer = "sector", ["hours"], ["age"], None  # no peers in CI
    else:
        private, held_out, schema = read(args.table, Path(args.data_dir))
        target = TARGETS[args.table]
    score = Scorer(schema, private, held_out, target)  # scored alike under any scale: the same bounds
    if args.what == "split-triples":
        print(split_line("private rows (the floor)", schema, private, held_out, args.column), flush=True)
        cut = private.copy()
        cut[args.column] = np.random.default_rng(0).permutation(cut[args.column].to_numpy())
        print(split_line(f"private rows, {args.column} shuffled", schema, cut, held_out, args.column), flush=True)
    if args.what in ("conditional-category", "category-prior"):
        lines = conditional_lines if args.what == "conditional-category" else prior_lines
        for epsilon in args.epsilons:
            for seed in args.seeds:
                lines(args, schema, private, held_out, score, epsilon=epsilon, seed=seed)
        return
    runs = runs_of(args, schema, target, private)
    if args.what == "shrinkage":
        for label, frame in (("private rows (the floor)", private),
                             ("exact tables (eps = inf, not private)", swflow(schema, private, epsilon=math.inf,
                                                                              n=len(private), seed=0))):
            print(f"{label:56}  {score_line(score(frame))}  {target_links(schema, frame, held_out, target)}")
    for epsilon in args.epsilons:
        for seed in args.seeds:
            for label, table_schema, settings in runs:
                frame = frame_of(args, label, table_schema, settings, private, epsilon=epsilon, seed=seed)
                if frame is None:
                    continue
                unit = "add-remove" if args.peer else args.adjacency
                if args.what == "split-triples":
                    print(split_line(f"eps {epsilon:g}  seed {seed}  {unit}  {label}", schema, frame, held_out,
                                     args.column), flush=True)
                    continue
                line = score_line(score(frame))
                if args.what == "shrinkage":
                    line += "  " + target_links(schema, frame, held_out, target)
                print(f"eps {epsilon:g}  seed {seed}  {unit}  {label:40}  {line}  (delta {DELTA:g})", flush=True)
                if args.what == "repeated-values" and not settings:
                    held = release_threshold(schema, epsilon)
                    line = score_line(score(snapped(schema, private, frame, held)))
                    print(f"eps {epsilon:g}  seed {seed}  {unit}  {'snapped (an oracle)':40}  {line}  (values held by "
                          f">= {held:.0f} private rows)", flush=True)


def target_links(schema, frame, held_out, target: str) -> str:
    """The target's Cramér's V with every other column, in the held-out rows' decile bins."""
    from swflow.tables.metrics import associations, decile_edges

    row = associations(schema, frame, decile_edges(schema, held_out))[schema.names.index(target)]
    return f"V({target}, ·) " + " ".join(f"{v:.2f}" for j, v in enumerate(row) if j != schema.names.index(target))


def score_line(result: dict) -> str:
    auc = "-" if result["auc"] is None else f"{result['auc']:.3f}"
    return f"3-way TVD {result['tvd_3way']:.3f}  AUC {auc}"


def runs_of(args, schema, target: str, private) -> list[tuple]:
    """(label, schema, swflow's settings) of each run the diagnostic compares."""
    if args.what == "log-scale":
        return [("as declared", schema, {}), (f"log scale on {', '.join(args.columns)}",
                                              log_scale(schema, args.columns), {})]
    if args.what in ("every-category", "few-pairs"):
        column = next(c for c in schema.columns if c.name == args.column)
    if args.what == "every-category":
        others = {} if args.others is None else {name: args.others for name in schema.names}
        tail = "" if args.others is None else f", others {args.others}"
        every = {"cells": {**others, args.column: len(column.categories)}} if others else {}  # else the defaults
        return [(f"{args.column} every category{tail}", schema, every),
                *[(f"{args.column} in {k} cells{tail}", schema, {"cells": {**others, args.column: k}})
                  for k in args.cells]]
    if args.what == "few-pairs":
        kept = [(a, b) for a, b in itertools.combinations(schema.names, 2) if args.column not in (a, b)]
        return [("defaults", schema, {}), (f"{args.column} only with {', '.join(args.partners)}, every category",
                                           schema, {"pairs": kept + [(args.column, p) for p in args.partners],
                                                    "cells": {args.column: len(column.categories)}})]
    if args.what == "target-pairs":
        star = [tuple(sorted((target, c), key=schema.names.index)) for c in schema.names if c != target]
        return [("every pair", schema, {}), (f"only {target}'s pairs", schema, {"pairs": star})]
    if args.what == "repeated-values":
        return [("defaults", schema, {}), ("repeated values named (repeated_values)", schema,
                                           {"repeated_values": True})]
    if args.what == "shrinkage":
        return [("shrunk (the default)", schema, {}), ("as released (shrink=False)", schema, {"shrink": False}),
                (f"{target}'s tables as released (target=)", schema, {"target": target})]
    if args.what == "tree-pairs":
        tree, ranked = oracle_pairs(schema, private)
        richer = sorted(set(tree) | set(ranked[:2 * len(schema.names)]), key=ranked.index)
        return [("every pair", schema, {}), (f"oracle tree ({len(tree)} pairs)", schema, {"pairs": tree}),
                (f"oracle tree + top {2 * len(schema.names)} ({len(richer)} pairs)", schema, {"pairs": richer})]
    return [(args.peer or "swflow", schema, {})]


def oracle_pairs(schema, private) -> tuple[list, list]:
    """(the maximum spanning tree of the columns' pairwise mutual information, every pair by falling mutual
    information), on the private rows in the scorer's bins, without noise: an oracle, never a release."""
    from scipy.sparse.csgraph import minimum_spanning_tree
    from sklearn.metrics import mutual_info_score

    from swflow.tables.metrics import decile_edges, discretize

    codes, names = discretize(schema, private, decile_edges(schema, private)), schema.names
    information = {(a, b): mutual_info_score(codes[:, i], codes[:, j])
                   for (i, a), (j, b) in itertools.combinations(enumerate(names), 2)}
    weights = np.zeros((len(names), len(names)))
    for (a, b), value in information.items():
        weights[names.index(a), names.index(b)] = -(value + 1e-12)  # every pair an edge, the strongest first
    tree = minimum_spanning_tree(weights).tocoo()
    ranked = sorted(information, key=information.get, reverse=True)
    in_tree = {tuple(sorted((names[i], names[j]), key=names.index)) for i, j in zip(tree.row, tree.col)}
    return [pair for pair in ranked if pair in in_tree], ranked


def sliced_columns(schema) -> list:
    from swflow.tables.cells import FineGrid

    return [c for c in schema.columns if c.kind == "numeric" and FineGrid(c).sliced]


def release_threshold(schema, epsilon: float, *, share: float = 0.1, delta_share: float = 1e-10) -> float:
    """The count above which a Gaussian release of the sliced columns' value counts at ``share`` of ρ (ρ-zCDP from
    ε at the benchmark's δ: ε = ρ + 2√(ρ ln 1/δ)) keeps a value, a value held by one record crossing it with
    probability ``delta_share`` over the 2C counts a replaced record moves."""
    import math

    from scipy.stats import norm

    columns = max(len(sliced_columns(schema)), 1)
    rho = (math.sqrt(math.log(1 / DELTA) + epsilon) - math.sqrt(math.log(1 / DELTA))) ** 2
    sigma = math.sqrt(2 * columns / (2 * share * rho))
    return 1 + sigma * norm.isf(delta_share / (2 * columns))


def snapped(schema, private, frame, threshold: float):
    """``frame`` with each sliced number moved to the value the private rows repeat in its fine slice, where one
    value holds at least half the slice's private rows and at least ``threshold`` of them (an oracle: private
    rows, no noise)."""
    import pandas as pd

    from swflow.tables.cells import FineGrid

    out = frame.copy()
    for column in sliced_columns(schema):
        grid = FineGrid(column)
        values = private[column.name].dropna().to_numpy(dtype=float)
        repeated, counts = np.unique(values, return_counts=True)
        held = np.bincount(grid.index(pd.Series(values)), minlength=grid.size)
        cells = grid.index(pd.Series(repeated))
        keep = (counts >= threshold) & (counts >= held[cells] / 2) & (cells > 0) & (cells < grid.values - 1)
        target = dict(zip(cells[keep], repeated[keep]))  # the bounds are atoms already
        drawn = out[column.name].to_numpy(dtype=float, na_value=np.nan).copy()
        present = ~np.isnan(drawn)
        drawn_cells = np.full(len(drawn), -1)
        drawn_cells[present] = grid.index(pd.Series(drawn[present]))
        for cell, value in target.items():
            drawn[drawn_cells == cell] = value
        out[column.name] = drawn
    return out


def frame_of(args, label: str, schema, settings: dict, private, *, epsilon: float, seed: int):
    """One draw's samples: swflow's fit, or the peer's (its unit, add/remove; cached beside the benchmark's draw,
    seed 0); None where the peer was stopped."""
    if not args.peer:
        return swflow(schema, private, epsilon=epsilon, n=len(private), seed=seed, adjacency=args.adjacency,
                      **settings)
    frame, facts = run_cell(args.peer, args.table, private, None, schema, epsilon=epsilon, n=len(private), seed=seed,
                            peer_codec=peer_codec_of(schema), cache=PEER_CACHE, cpu_minutes=60.0)  # the benchmark's
    if frame is None:
        print(f"eps {epsilon:g}  seed {seed}  {label}: {facts['stopped']}", flush=True)
    return frame


def conditional_lines(args, schema, private, held_out, score, *, epsilon: float, seed: int) -> None:
    """swflow's samples as decoded, and with ``--column`` drawn again inside its released cell from the private
    rows' law given the cell and the ``--with`` columns' sampled values (the most of them some private row shares),
    without noise: an oracle, never a release, that bounds what a release of the category given those columns (a
    hierarchy name -> storm-year) could bring."""
    from swflow.pipeline.tables import TableSynthesizer

    syn = TableSynthesizer(schema=schema, epsilon=epsilon, delta=DELTA, clip=True, seed=seed,
                           adjacency=args.adjacency).fit(private)
    frame = syn.sample(len(private), seed=seed)
    cells = syn.codec.cells[schema.names.index(args.column)]
    keys = [tuple(row) for row in private[args.partners].to_numpy(dtype=object)]
    pools: dict = {}
    for cell, key, value in zip(cells.index(private[args.column]), keys, private[args.column].to_numpy(dtype=object)):
        for depth in range(1, len(key) + 1):  # (cell, first partner), (cell, first two), ...
            pools.setdefault((cell, key[:depth]), []).append(value)
    rng, drawn = np.random.default_rng(seed), frame[args.column].to_numpy(dtype=object).copy()
    sampled = [tuple(row) for row in frame[args.partners].to_numpy(dtype=object)]
    for i, (cell, key) in enumerate(zip(cells.index(frame[args.column]), sampled)):
        pool = next((pools[(cell, key[:d])] for d in range(len(key), 0, -1) if (cell, key[:d]) in pools), None)
        if pool:
            drawn[i] = pool[rng.integers(len(pool))]
    oracle = frame.copy()
    oracle[args.column] = drawn
    given = ", ".join(args.partners)
    for label, result in (("swflow", frame), (f"{args.column} given its cell and {given} (an oracle)", oracle)):
        line = split_line(f"eps {epsilon:g}  seed {seed}  {args.adjacency}  {label}", schema, result, held_out,
                          args.column)
        print(f"{line}  all: {score_line(score(result))}", flush=True)


def prior_lines(args, schema, private, held_out, score, *, epsilon: float, seed: int) -> None:
    """One release, its particles fitted with the columns' priors (the library) and again without them
    (the codec's priors set to none on this one fit): both sides share the draw of the noise."""
    from swflow.pipeline.tables import TableSynthesizer

    syn = TableSynthesizer(schema=schema, epsilon=epsilon, delta=DELTA, clip=True, seed=seed,
                           adjacency=args.adjacency).fit(private)
    with_prior = syn.sample(len(private), seed=seed)
    syn.codec.priors = lambda: [None] * len(schema.names)  # this instance only
    syn._particles = syn._fit_to_release()
    categories = [c.name for c in schema.columns if c.kind == "categorical" and len(c.categories) > 2]
    for label, frame in (("toward the priors (default)", with_prior), ("no prior", syn.sample(
            len(private), seed=seed))):
        result, ones = score(frame), marginal_errors(schema, frame, held_out, 1)
        each = "  ".join(f"{name} {ones[(name,)]:.3f}" for name in categories)
        print(f"eps {epsilon:g}  seed {seed}  {args.adjacency}  {label:36}  1-way {result['tvd_1way']:.3f}  "
              f"{score_line(result)}  ({each})", flush=True)


def split_line(label: str, schema, frame, held_out, column: str) -> str:
    """Mean 3-way TVD against held-out rows over the triples that hold ``column``, and over the others."""
    errors = marginal_errors(schema, frame, held_out, 3)
    holding = [e for names, e in errors.items() if column in names]
    others = [e for names, e in errors.items() if column not in names]
    return (f"{label:48}  3-way TVD {np.mean(list(errors.values())):.3f}: the {len(holding)} triples holding "
            f"{column} {np.mean(holding):.3f}, the other {len(others)} {np.mean(others):.3f}")


if __name__ == "__main__":
    main()
