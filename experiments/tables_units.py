"""Privacy per person (issue 75): a table run whose unit is a person and all of their rows, against what a user can
do today with the same guarantee per person.

Tables with many rows per unit: insteval by student (``s``, about 25 ratings each), storms by storm (``name`` and
``year``: a storm is observed 4-96 times), txhousing by city (187 months each), and ``events``, a made-up table of
customers' purchases whose law is known (a segment per customer; 1 to about 150 purchases each, more for some
segments; a rare returned purchase, 6 %). Each is split at random by unit (public seed): the rows of half the units
are private, the other half's rows are held out. The unit's column is an identifier: no method synthesizes it (the
schema leaves it out) and no score reads it.

Every method gives the same guarantee, (ε, δ)-DP under add/remove of one unit and all of its rows, δ = 1e-9:
- ``one-row``: one row of each unit kept at random, swflow on them (add/remove of a row is then of a unit);
- ``group-8``, ``group-32``: at most k rows of each unit kept at random, swflow on them at the row-level budget that
  group privacy turns into the per-unit one: (ε/k, δ / (k·e^{(k−1)ε/k}));
- ``unit-K``: swflow with ``privacy_unit`` and ``max_rows_per_unit=K`` (swflow/privacy/units.py: each unit's rows
  weighted to at most K, sensitivity K × a row's), for K in 1, 2, 4, 8, 16, 32; ``unit`` is the default K;
- ``mst-one-row``, ``aim-one-row``: dpmm's MST and AIM (add/remove, 32 equal-width bins) on one row per unit, in
  their own environment (`make peers-env`); AIM at ε = 1 only.
- ``uniform``: records uniform over the schema, the trivial answer (free; what a release must stay well below).
Scored as experiments/tables_bench.py does: mean 3-way TVD against the held-out units' rows (with numbers in 10 bins
at the held-out deciles), a classifier's AUC (trained on the synthetic rows, tested on the held-out ones), the floor
being the private rows themselves. Besides the raw scores, what a release adds: (method − floor) / (best other
option − floor). Each finished cell is kept in --out, so a rerun continues:

    make tables-data peers-env
    python experiments/tables_units.py                      # every table, method and ε
    python experiments/tables_units.py --seeds 0 1 2 3 4 --figure docs/tables_units.png   # five draws, the figure
    python experiments/tables_units.py --smoke              # the made-up table only, small (CI)
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from tables_adult import PEER_PYTHON, Scorer, uniform_records  # noqa: E402
from tables_bench import DELTA, peer_codec_of, peer_samples  # noqa: E402

ROOT = HERE.parent
#: table -> (its rows' file in data/tables, the unit's column, the column a classifier predicts)
TABLES = {"insteval": ("insteval", "s", "y"), "storms": ("storms", "storm", "wind"),
          "txhousing": ("txhousing", "city", "median"), "events": (None, "customer", "returned")}
UNIT_KS = (1, 2, 4, 8, 32)
GROUP_KS = (8, 32)
PEERS = ("mst", "aim")

EVENTS_SCHEMA = {"columns": [
    {"name": "segment", "type": "categorical", "categories": ["casual", "regular", "trade"]},
    {"name": "channel", "type": "categorical", "categories": ["web", "store", "phone"]},
    {"name": "amount", "type": "numeric", "min": 0, "max": 5000, "scale": "log"},
    {"name": "hour", "type": "numeric", "min": 0, "max": 23, "integer": True},
    {"name": "weekday", "type": "categorical", "categories": ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]},
    {"name": "returned", "type": "categorical", "categories": ["no", "yes"]}]}


def events(units: int, *, seed: int) -> pd.DataFrame:
    """A made-up table of ``units`` customers' purchases (law known: this function). A customer's segment sets how
    often they buy (casual ~3 purchases, regular ~12, trade ~40, geometric), where, and how much; a purchase's hour
    follows its channel, and it is returned (6 % of purchases) more often on the web and for large amounts."""
    rng = np.random.default_rng(seed)
    segment = rng.choice(3, units, p=[0.55, 0.35, 0.10])
    purchases = np.minimum(rng.geometric(1 / np.array([3.0, 12.0, 40.0])[segment]), 150)
    customer = np.repeat(np.arange(units), purchases)
    seg = segment[customer]
    n = len(customer)
    channel = np.array([rng.choice(3, p=p) for p in np.array([[0.6, 0.3, 0.1], [0.4, 0.5, 0.1],
                                                               [0.2, 0.3, 0.5]])[seg]])
    amount = np.clip(np.exp(rng.normal(np.array([3.0, 3.8, 5.5])[seg], 0.8)), 0.5, 5000).round(2)
    hour = np.clip(np.round(rng.normal(np.array([20.0, 13.0, 10.0])[channel], 3)), 0, 23).astype(np.int64)
    weekday = np.where(seg == 2, rng.choice(5, n), rng.choice(7, n))
    odds = -3.6 + 1.0 * (channel == 0) + 0.5 * (np.log(amount) - 3.5)
    returned = rng.uniform(size=n) < 1 / (1 + np.exp(-odds))
    return pd.DataFrame({"customer": customer, "segment": np.array(["casual", "regular", "trade"])[seg],
                         "channel": np.array(["web", "store", "phone"])[channel], "amount": amount, "hour": hour,
                         "weekday": np.array(EVENTS_SCHEMA["columns"][4]["categories"])[weekday],
                         "returned": np.where(returned, "yes", "no")})


def read(table: str, data_dir: Path, *, seed: int, units: int = 4000):
    """(private rows, held-out rows, the schema without the unit, the unit's column): split by unit, half each."""
    from swflow.tables import Schema

    source, unit, _ = TABLES[table]
    if source is None:
        frame, schema = events(units, seed=seed + 1000), Schema.from_json(EVENTS_SCHEMA)
    else:
        path = data_dir / f"{source}.csv"
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing: `make tables-data` writes the benchmark's tables")
        full = Schema.read(HERE / "tables" / "bench" / f"{source}.json")
        frame = pd.read_csv(path)
        if table == "storms":  # a storm is a name in a year (names come back); the name is part of its identifier
            frame[unit] = frame["name"].astype(str) + " " + frame["year"].astype(str)
        drop = {"storms": ("name",)}.get(table, ()) + (unit,)
        schema = Schema(tuple(c for c in full.columns if c.name not in drop), full.rules)
        ids = frame[unit]
        frame = schema.check(frame.drop(columns=[c for c in frame.columns if c not in schema.names]), clip=True)
        frame[unit] = ids.to_numpy()
    names = frame[unit].unique()
    chosen = set(np.random.default_rng(seed).permutation(names)[: len(names) // 2])
    private = frame[frame[unit].isin(chosen)].reset_index(drop=True)
    held_out = frame[~frame[unit].isin(chosen)].reset_index(drop=True)
    return private, held_out, schema, unit


def keep_rows(private: pd.DataFrame, unit: str, k: int, *, seed: int) -> pd.DataFrame:
    """At most ``k`` rows of each unit, chosen at random (what a user does today to bound a unit's rows)."""
    shuffled = private.sample(frac=1.0, random_state=seed)
    return shuffled[shuffled.groupby(unit).cumcount() < k].reset_index(drop=True)


def group_budget(epsilon: float, delta: float, k: int) -> tuple[float, float]:
    """The row-level (ε', δ') whose group privacy over k rows is (ε, δ): ε' = ε/k,
    δ' = δ / (k·e^{(k−1)ε'})."""
    small = epsilon / k
    return small, delta / (k * math.exp((k - 1) * small))


def run_cell(method: str, private: pd.DataFrame, schema, unit: str, *, epsilon: float, n: int, seed: int,
             steps: int | None, cache: Path, table: str) -> tuple[pd.DataFrame | None, dict]:
    """(samples or None, facts) of one method on one table at ``epsilon``."""
    from swflow import Synthesizer

    fit = {} if steps is None else {"steps": steps}
    rows = private.drop(columns=[unit])
    if method == "private":
        return rows, {}
    if method == "uniform":
        return uniform_records(peer_codec_of(schema), n=n, seed=seed), {}
    if method in ("one-row", *(f"group-{k}" for k in GROUP_KS)):
        k = 1 if method == "one-row" else int(method.split("-")[1])
        eps, delta = group_budget(epsilon, DELTA, k)
        kept = keep_rows(private, unit, k, seed=seed)
        syn = Synthesizer("dpswflow-hist", schema=schema, epsilon=eps, delta=delta, adjacency="add-remove",
                          clip=True, seed=seed, **fit)
        return syn.fit(kept.drop(columns=[unit])).sample(n, seed=seed), {"rows_kept": len(kept)}
    if method.startswith("unit"):
        k = None if method == "unit" else int(method.split("-")[1])
        syn = Synthesizer("dpswflow-hist", schema=schema, epsilon=epsilon, delta=DELTA, clip=True, seed=seed,
                          privacy_unit=unit, max_rows_per_unit=k, **fit).fit(private)
        return syn.sample(n, seed=seed), {"max_rows_per_unit": syn.unit.max_rows,
                                          "mass_kept": mass_kept(syn, private, unit)}
    peer = method.removesuffix("-one-row")
    kept = keep_rows(private, unit, 1, seed=seed).drop(columns=[unit])
    return peer_samples(peer, f"units-{table}", peer_codec_of(schema), kept, epsilon=epsilon, n=n, seed=seed,
                        cache=cache, cpu_minutes=60.0)


def cell_key(table: str, method: str, epsilon: float | None, seed: int) -> str:
    """A cell's key in --out: the first draw's (seed 0) as it always was, the others' with their seed."""
    key = f"{table} {method}" if epsilon is None else f"{table} {method} eps={epsilon:g}"
    return key if seed == 0 else f"{key} seed={seed}"


def mean_cell(cells: dict, table: str, method: str, epsilon: float | None, seeds: list[int]) -> dict | None:
    """The mean over the ``seeds`` drawn of a cell's 3-way TVD and AUC (None where no draw has it), and the draws."""
    drawn = [c for c in (cells.get(cell_key(table, method, epsilon, s)) for s in seeds)
             if c is not None and c.get("tvd_3way") is not None]
    if not drawn:
        return None
    aucs = [c["auc"] for c in drawn if c.get("auc") is not None]
    return {"tvd_3way": float(np.mean([c["tvd_3way"] for c in drawn])),
            "auc": float(np.mean(aucs)) if aucs else None, "draws": len(drawn)}


def mass_kept(syn, private: pd.DataFrame, unit: str) -> float:
    """The share of the private rows' mass the pair tables counted: each unit's rows at its weight for them
    (swflow.privacy.units.spread_weights on the run's cells and pairs). Computed here from the private rows, for
    the benchmark's report only: the run itself publishes no such number."""
    from swflow.privacy.units import ROWS_COLUMN, spread_weights, unit_codes

    frame = private.drop(columns=[unit]).assign(**{ROWS_COLUMN: syn.schema.columns[-1].categories[0]})
    cells = syn.codec.cell_index(syn.schema.check(frame, clip=True))
    weights = spread_weights(unit_codes(private[unit]), cells, syn.pairs, max_rows=syn.unit.max_rows,
                             constant=len(syn.schema.columns) - 1)
    return float(weights.mean())


def excess_text(cells: dict, tables: list[str], epsilons: list[float], seeds: list[int]) -> str:
    """Markdown: 3-way TVD (AUC) per table, method and ε, and each unit run's excess over the floor against the
    best of the user's current options (one row per unit, group privacy, the peers on one row per unit)."""
    options = ["one-row", *(f"group-{k}" for k in GROUP_KS), *(f"{p}-one-row" for p in PEERS)]
    runs = ["unit", *(f"unit-{k}" for k in UNIT_KS)]
    out = []
    for epsilon in epsilons:
        out.append(f"ε = {epsilon:g}, δ = {DELTA:g} per unit (3-way TVD / AUC, the mean of the draws {seeds}; "
                   "excess over the floor ÷ the best option's)\n")
        out.append("| table | floor | uniform | " + " | ".join(options + runs) + " |")
        out.append("|" + "---|" * (len(options) + len(runs) + 3))
        for table in tables:
            floor, uniform = ((mean_cell(cells, table, free, None, seeds) or {}).get("tvd_3way")
                              for free in ("private", "uniform"))
            row, values = [], {}
            for m in options + runs:
                c = mean_cell(cells, table, m, epsilon, seeds)
                values[m] = None if c is None else c.get("tvd_3way")
                row.append("–" if values[m] is None else f"{values[m]:.3f}" + (
                    f" / {c['auc']:.2f}" if c.get("auc") is not None else ""))
            best = min((v for m, v in values.items() if m in options and v is not None), default=None)
            for i, m in enumerate(runs):
                if values[m] is not None and best is not None and floor is not None and best > floor:
                    row[len(options) + i] += f" ({(values[m] - floor) / (best - floor):.2f})"
            free = " | ".join("–" if v is None else f"{v:.3f}" for v in (floor, uniform))
            out.append(f"| {table} | {free} | " + " | ".join(row) + " |")
        out.append("")
    return "\n".join(out)


def figure(cells: dict, tables: list[str], epsilons: list[float], seeds: list[int], path: Path) -> Path:
    """One panel a table and ε: the unit run's mean 3-way TVD against k (the draws as dots), each option with the
    same per-unit guarantee as a horizontal line, the private rows (the floor) and uniform records dashed."""
    from matplotlib.figure import Figure  # no pyplot: nothing process-wide changes

    options = {"one-row": ("one row a unit", "C0"), "group-8": ("group privacy, k = 8", "C1"),
               "group-32": ("group privacy, k = 32", "C2"), "mst-one-row": ("MST, one row a unit", "C3"),
               "aim-one-row": ("AIM, one row a unit", "C4")}
    fig = Figure(figsize=(max(6.0, 2.9 * len(tables)), 2.6 * len(epsilons) + 0.9), layout="constrained")
    axes = np.array(fig.subplots(len(epsilons), len(tables), squeeze=False))
    for row, epsilon in enumerate(epsilons):
        for ax, table in zip(axes[row], tables):
            means = {k: c["tvd_3way"] for k in UNIT_KS
                     if (c := mean_cell(cells, table, f"unit-{k}", epsilon, seeds)) is not None}
            if means:
                ax.plot(list(means), list(means.values()), marker="o", color="k", label="unit run (mean)")
                for k in means:
                    draws = [c["tvd_3way"] for s in seeds
                             if (c := cells.get(cell_key(table, f"unit-{k}", epsilon, s))) and c.get("tvd_3way") is not None]
                    ax.plot([k] * len(draws), draws, linestyle="none", marker=".", color="0.6", markersize=4)
            for method, (label, color) in options.items():
                if (c := mean_cell(cells, table, method, epsilon, seeds)) is not None:
                    ax.axhline(c["tvd_3way"], color=color, linewidth=1.2, label=label)
            for method, label, style in (("private", "private rows (floor)", "--"),
                                         ("uniform", "uniform records", ":")):
                if (c := mean_cell(cells, table, method, None, seeds)) is not None:
                    ax.axhline(c["tvd_3way"], color="k", linestyle=style, linewidth=1, label=label)
            ax.set_xscale("log", base=2)
            ax.set_xticks(UNIT_KS, [str(k) for k in UNIT_KS])
            ax.set_ylim(bottom=0)
            ax.set_title(f"{table}, ε = {epsilon:g}", fontsize=9)
            ax.set_xlabel("max_rows_per_unit k", fontsize=8)
            ax.set_ylabel("mean 3-way TVD", fontsize=8)
    handles = {}
    for ax in axes.ravel():
        handles.update(dict(zip(*reversed(ax.get_legend_handles_labels()))))
    fig.legend(list(handles.values()), list(handles.keys()), loc="outside lower center", ncols=4, fontsize=8)
    fig.savefig(path, dpi=100)
    return path


def draw_arguments(p: argparse.ArgumentParser, *, out: str) -> None:
    """The arguments every per-unit benchmark takes: its tables, ε, draws, the data, the cells' file (each script
    declares its own --smoke, which :func:`draw_settings` reads)."""
    p.add_argument("--tables", nargs="+", default=list(TABLES), choices=list(TABLES))
    p.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 10.0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0],
                   help="draws: each a new split by unit and new runs; the tables show each cell's mean over them")
    p.add_argument("--data-dir", default=str(ROOT / "data" / "tables"))
    p.add_argument("--out", default=out)


def draw_settings(args) -> tuple[int | None, int]:
    """(the fit's steps, the made-up table's units): the benchmark's, or under --smoke a small run of the made-up
    table, its cells in a temporary file."""
    if not args.smoke:
        return None, 4000
    args.tables, args.epsilons = ["events"], [5.0]
    args.out = str(Path(tempfile.mkdtemp()) / Path(args.out).name)
    return 100, 300


def store_cell(out: Path, cells: dict, key: str, cell: dict) -> dict:
    """``cells`` with ``key`` set to ``cell``, written to ``out`` over the cells it holds now (another run may have
    added some since they were read)."""
    cells = {**(json.loads(out.read_text()) if out.exists() else cells), key: cell}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(cells, indent=1) + "\n")
    return cells


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    draw_arguments(p, out="experiments/out/tables_units.json")
    p.add_argument("--smoke", action="store_true", help="the made-up table, 300 customers, eps 5, few steps (CI)")
    p.add_argument("--methods", nargs="+", default=["private", "uniform", "one-row", *(f"group-{k}" for k in GROUP_KS),
                                                    "unit", *(f"unit-{k}" for k in UNIT_KS),
                                                    *(f"{p}-one-row" for p in PEERS)])
    p.add_argument("--redo", nargs="+", default=[], help="methods whose cached scores are recomputed")
    p.add_argument("--json", action="store_true", help="print the cells as one JSON object")
    p.add_argument("--figure", help="draw the error against k, per table and ε, to this PNG (from --out's cells)")
    args = p.parse_args(argv)
    steps, units = draw_settings(args)
    if args.smoke:
        args.methods = ["private", "uniform", "one-row", "group-8", "unit", "unit-2"]
        args.figure = str(Path(args.out).with_suffix(".png"))
    out = Path(args.out)
    cells = json.loads(out.read_text()) if out.exists() else {}
    for table, seed in ((t, s) for t in args.tables for s in args.seeds):
        private, held_out, schema, unit = read(table, Path(args.data_dir), seed=seed, units=units)
        score = Scorer(schema, private.drop(columns=[unit]), held_out.drop(columns=[unit]), TABLES[table][2])
        for method in args.methods:
            if method.endswith("-one-row") and not PEER_PYTHON.exists():
                print(f"{method}: no environment at {PEER_PYTHON} (make peers-env): skipped")
                continue
            epsilons = args.epsilons[:1] if method == "aim-one-row" else args.epsilons
            for epsilon in [None] if method in ("private", "uniform") else epsilons:
                key = cell_key(table, method, epsilon, seed)
                if key in cells and method not in args.redo:
                    continue
                t0 = time.perf_counter()
                frame, facts = run_cell(method, private, schema, unit, epsilon=epsilon or 1.0, n=len(private),
                                        seed=seed, steps=steps, cache=out.parent / "tables_units_peers",
                                        table=table)
                seconds = time.perf_counter() - t0
                cell = {"tvd_3way": None, **facts} if frame is None else {
                    **score(frame), **facts, "seconds": facts.get("cpu_seconds", seconds), "rows": len(frame)}
                if frame is not None:
                    assert len(schema.check(frame)) == len(frame)  # every synthetic row valid under the schema
                cells = store_cell(out, cells, key, cell)
                shown = "no result" if cell["tvd_3way"] is None else f"tvd 3-way {cell['tvd_3way']:.3f}"
                print(f"{key:36} {shown}  auc {cell.get('auc')}  ({seconds:.0f} s)", flush=True)
        units_of = private[unit].nunique()
        print(f"{table} (seed {seed}): {units_of} private units, {len(private)} rows ({len(private) / units_of:.1f} a unit), "
              f"{held_out[unit].nunique()} held-out units")
    print(excess_text(cells, args.tables, args.epsilons, args.seeds))
    if args.figure:
        print(f"figure: {figure(cells, args.tables, args.epsilons, args.seeds, Path(args.figure))}")
    if args.json:
        print(json.dumps(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
