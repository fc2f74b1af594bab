"""The data owner's report on a table run: `swflow evaluate RUN --against HELDOUT.csv`.

It compares the run's synthetic records with held-out rows the run never saw, and writes, beside the run's folder
and never inside what a user publishes, into RUN.owner/ (or a folder the owner names): metrics.json (mean TVD of the 1-, 2- and 3-way marginals, each
column's, the pairs that differ most; with a target, a classifier's accuracy and AUC; with the private rows, how
close the records come to them beside held-out rows), marginals.png (each column, synthetic beside held-out) and associations.png
(Cramér's V of every pair of columns, synthetic beside held-out). The held-out rows are shown without noise: the
folder is for the owner, and says so in every file.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
import warnings
from pathlib import Path

import numpy as np

__all__ = ["owner_report", "owner_dir", "releases_of", "OWNER_NOTE"]
OWNER_NOTE = ("OWNER ONLY: these files compare the synthetic records with held-out rows, shown WITHOUT noise; "
              "they are not covered by the run's privacy guarantee. Never publish this folder with the run.")


def owner_dir(run_dir: str | Path) -> Path:
    """The owner's folder of a run by default: RUN.owner/, beside RUN/ (never inside it)."""
    run_dir = Path(run_dir)
    return run_dir.parent / f"{run_dir.name}.owner"


def releases_of(report) -> list[dict]:
    """Each release of a run's verified ``report`` (public: its ledger), by the name of what it measured (None in a
    run of an earlier swflow): its noise std, K, sensitivity and mechanism."""
    return [{"measurement": e.get("measurement"), "noise_std": e["noise_std"], "n_projections": e["n_projections"],
             "sensitivity": e["sensitivity"], "mechanism": e["mechanism"]} for e in report.ledger]


def owner_report(run_dir: str | Path, against: str | Path, *, target: str | None = None,
                 out: str | Path | None = None, private: str | Path | None = None) -> dict:
    """Write the owner's folder ``out`` (default :func:`owner_dir`; module docstring) and return its metrics;
    ``private``: the run's private rows, to say how close the synthetic records come to them beside held-out rows
    (metrics.closest_records), read here and written nowhere."""
    from ..privacy.verify import read_verified_report
    from .files import read_table
    from .metrics import closest_records, decile_edges, efficacy, marginal_tvd
    from ..io.hdf5 import load_tensors
    from .schema import Schema

    run_dir = Path(run_dir)
    report = read_verified_report(run_dir)
    blob = load_tensors(run_dir / "model.pt", what="table run's model")
    schema, unit = Schema.from_json(blob["schema"]), (blob.get("unit") or {}).get("column")
    synthetic_path = next(p for p in (run_dir / "samples.csv", run_dir / "samples.parquet") if p.exists())
    synthetic = schema.check(read_table(synthetic_path, schema=schema))
    held_out = _checked_rows(against, schema, unit)
    metrics = {"owner_only": OWNER_NOTE, "run": str(run_dir), "statement": report.statement,
               "epsilon": report.epsilon, "delta": report.delta, "releases": releases_of(report),
               "against": str(against),
               "synthetic_rows": len(synthetic), "held_out_rows": len(held_out),
               "protocol": "numbers in 10 bins at the held-out rows' deciles, a value that a tenth of them hold in "
                           "a bin of its own; categories as declared",
               **marginal_tvd(schema, synthetic, held_out), **_scores(schema, synthetic, held_out)}
    if target is not None:
        metrics.update(efficacy(schema, synthetic, held_out, target), target=target)
    if private is not None:
        metrics.update(closest_records(schema, synthetic, _checked_rows(private, schema, unit), held_out))
    edges = decile_edges(schema, held_out)
    out = Path(out) if out is not None else owner_dir(run_dir)
    if out.resolve() == run_dir.resolve() or run_dir.resolve() in out.resolve().parents:
        raise ValueError(f"the owner's report shows held-out rows without noise: write it outside the run folder "
                         f"{run_dir}, not into {out}")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out) as tmp:  # each file appears whole, or not at all
        tmp = Path(tmp)
        (tmp / "metrics.json").write_text(json.dumps(_strict(metrics), indent=2, allow_nan=False) + "\n")
        with _label_fonts():
            _marginals_picture(schema, synthetic, held_out, edges, tmp / "marginals.png",
                               shown=_worst_columns(metrics["tvd_1way_by_column"]))
            _associations_picture(schema, synthetic, held_out, edges, tmp / "associations.png")
        (tmp / "OWNER_ONLY.txt").write_text(OWNER_NOTE + "\n")
        for name in ("metrics.json", "marginals.png", "associations.png", "OWNER_ONLY.txt"):
            os.replace(tmp / name, out / name)
    return metrics


#: the column pairs metrics.json lists by their 2-way TVD, largest first; the columns marginals.png draws at most
WORST_PAIRS, MAX_PANELS = 20, 24


def _scores(schema, synthetic, held_out) -> dict:
    """Each column's 1-way TVD, and the WORST_PAIRS pairs of columns with the largest 2-way TVD: what a mean
    hides."""
    from .metrics import marginal_errors

    columns = {names[0]: round(tvd, 6) for names, tvd in marginal_errors(schema, synthetic, held_out, 1).items()}
    pairs = sorted(marginal_errors(schema, synthetic, held_out, 2).items(), key=lambda item: -item[1])[:WORST_PAIRS]
    return {"tvd_1way_by_column": columns,
            "tvd_2way_worst_pairs": [{"columns": list(names), "tvd": round(tvd, 6)} for names, tvd in pairs]}


def _worst_columns(by_column: dict) -> list[str] | None:
    """The MAX_PANELS columns with the largest 1-way TVD (in the schema's order), or None for every column."""
    if len(by_column) <= MAX_PANELS:
        return None
    worst = set(sorted(by_column, key=lambda name: -by_column[name])[:MAX_PANELS])
    return [name for name in by_column if name in worst]


def _checked_rows(path, schema, unit: str | None):
    """The rows of ``path`` under the schema (clipped to its bounds), without a unit run's unit column: it groups
    rows, and is never scored."""
    from .files import read_table

    frame = read_table(path, schema=schema)
    try:
        return schema.check(frame.drop(columns=[unit], errors="ignore") if unit else frame, clip=True)
    except ValueError as err:
        raise ValueError(f"the rows of {path}: {err}") from None


def _strict(value):
    """JSON's values only: a number that is not finite becomes null."""
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


#: families tried, in order, for a label's characters that DejaVu Sans lacks (where installed)
FALLBACK_FONTS = ("Noto Sans CJK JP", "Noto Sans CJK SC", "Noto Sans", "Source Han Sans", "WenQuanYi Zen Hei",
                  "Arial Unicode MS", "Noto Sans Arabic", "Noto Sans Hebrew", "Noto Sans Devanagari")


@contextlib.contextmanager
def _label_fonts():
    """Within the block: every installed family of FALLBACK_FONTS after DejaVu Sans (matplotlib falls back glyph by
    glyph), and one warning, not one per character, naming what no installed font can draw (it shows as a box;
    metrics.json holds the names right). Scoped: matplotlib's settings and the warning filters are restored after."""
    import matplotlib
    from matplotlib import font_manager

    installed = {f.name for f in font_manager.fontManager.ttflist}
    families = ["DejaVu Sans", *(name for name in FALLBACK_FONTS if name in installed)]
    with matplotlib.rc_context({"font.family": families}), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    missing = sorted({str(w.message).split(" (")[0].removeprefix("Glyph ") for w in caught
                      if "missing from font" in str(w.message)})
    for w in caught:
        if "missing from font" not in str(w.message):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if missing:
        warnings.warn(f"the owner's pictures draw {len(missing)} character(s) of the labels as boxes: no installed "
                      f"font has them (install one that does, e.g. Noto Sans CJK); metrics.json and the files hold "
                      "the names right", stacklevel=3)


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(figure)
    return figure


def _marginals_picture(schema, synthetic, held_out, edges: dict, path: Path, *, shown: list[str] | None = None
                       ) -> None:
    """Each column's marginal, synthetic beside held-out; of a wide table, the ``shown`` columns only (the largest
    differences), said in the title."""
    from .metrics import discretize
    from .schema import Schema

    title = "OWNER ONLY: synthetic vs held-out marginals (held-out rows shown without noise)"
    if shown is not None:
        title += (f"\n{len(shown)} of {len(schema.columns)} columns: those whose marginals differ most "
                  "(metrics.json, tvd_1way_by_column, has every column)")
        schema = Schema(tuple(c for c in schema.columns if c.name in shown))
        synthetic, held_out = synthetic[schema.names], held_out[schema.names]
        edges = {name: e for name, e in edges.items() if name in shown}
    count = len(schema.columns)
    cols = min(4, count)
    rows = math.ceil(count / cols)
    figure = _figure(4.0 * cols, 2.6 * rows + 0.6)
    a, b = discretize(schema, synthetic, edges), discretize(schema, held_out, edges)
    for j, column in enumerate(schema.columns):
        ax = figure.add_subplot(rows, cols, j + 1)
        if column.kind == "numeric":
            labels = _range_labels(column, edges[column.name])
            size = len(labels)
        else:
            size = len(column.categories)
            labels = ["(missing)" if v is None else _short(str(v)) for v in column.categories]
        shares = [np.bincount(np.clip(z[:, j], 0, size - 1), minlength=size) / len(z) for z in (a, b)]
        if column.kind == "categorical":
            labels, shares = _shown_categories(column, labels, shares)
            size = len(labels)
        x = np.arange(size)
        ax.bar(x - 0.2, shares[0], width=0.4, label="synthetic")
        ax.bar(x + 0.2, shares[1], width=0.4, label="held-out (no noise)")
        ax.set_title(column.name + (" (deciles of held-out)" if column.kind == "numeric" else ""), fontsize=9)
        ax.set_ylabel("share of rows", fontsize=7)
        ax.set_xticks(x, labels, rotation=90 if size > 4 else 0, fontsize=6)
        ax.tick_params(axis="y", labelsize=7)
    # one legend for every panel, above them: never over a bar
    figure.legend(*figure.axes[0].get_legend_handles_labels(), loc="upper right", ncol=2, fontsize=8, frameon=False)
    figure.suptitle(title, fontsize=10, x=0.02, ha="left")
    figure.tight_layout(rect=(0, 0, 1, 0.95 if shown is None else 0.93))
    figure.savefig(path)


#: the most bars a category column shows: the largest held-out shares, the rest summed as "(N others)"
MAX_BARS = 30


def _short(text: str, width: int = 12) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def _shown_categories(column, labels: list[str], shares: list[np.ndarray]) -> tuple[list[str], list[np.ndarray]]:
    """A category column's bars in reading order (numbers by value, the missing value last) and, beyond MAX_BARS,
    the largest held-out shares with the rest summed into one bar."""
    values = list(column.categories)
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values if v is not None)
    order = sorted(range(len(values)), key=lambda i: (values[i] is None, values[i] if numbers and values[i] is not None
                                                      else i))
    if len(order) > MAX_BARS:
        kept = set(sorted(order, key=lambda i: -shares[1][i])[:MAX_BARS - 1])
        rest = [i for i in order if i not in kept]
        order = [i for i in order if i in kept]
        return ([labels[i] for i in order] + [f"({len(rest)} others)"],
                [np.append(share[order], share[rest].sum()) for share in shares])
    return [labels[i] for i in order], [share[order] for share in shares]


def _range_labels(column, edges: np.ndarray) -> list[str]:
    """The value range of each decile bin ("< 12", "12 – 20", …, "≥ 90"; dates as dates; a pile's bin, from its
    value to the next float (:func:`~swflow.tables.metrics.decile_edges`), by its value: "0", then "> 0"), and
    "(missing)" where the column may be missing: what a reader wants on the axis, not d1…d10."""
    from .types import instant_text

    def text(x: float, digits: int) -> str:
        if column.temporal:  # to the minute: a bin's edge needs no seconds
            return instant_text(round(x), column.temporal, column.unit).replace("T", " ")[:16]
        if x != 0 and not 1e-4 <= abs(x) < 1e7:
            return f"{x:.{digits}g}"
        return np.format_float_positional(x, precision=digits, unique=False, fractional=False, trim="-")

    pile_ends = {hi for lo, hi in zip(edges[:-1], edges[1:]) if hi == np.nextafter(lo, np.inf)}
    values = [x for x in edges if x not in pile_ends]
    # the fewest significant digits (at least 3) that tell every edge apart: 3 would print pressures of 1005 and
    # 1010 hPa both as 1.01e+03
    digits = next((d for d in range(3, 17) if len({text(x, d) for x in values}) == len(values)), 17)
    if len(edges) == 0:
        return ["all"] + (["(missing)"] if column.missing else [])
    # the edge just past a pile is labelled by the pile's value
    shown = [text(np.nextafter(x, -np.inf) if x in pile_ends else x, digits) for x in edges]
    labels = [f"< {shown[0]}"]
    for k in range(1, len(edges)):
        labels.append(shown[k - 1] if edges[k] in pile_ends else f"{shown[k - 1]} – {shown[k]}")
    labels.append(f"> {shown[-1]}" if edges[-1] in pile_ends else f"≥ {shown[-1]}")
    return labels + (["(missing)"] if column.missing else [])


def _associations_picture(schema, synthetic, held_out, edges: dict, path: Path) -> None:
    _associations_figure(schema, synthetic, held_out, edges).savefig(path)


def _associations_figure(schema, synthetic, held_out, edges: dict):
    """Two maps of Cramér's V side by side, every column named on the axes at a size its row's height allows."""
    from .metrics import associations

    names = schema.names
    side = max(6.0, 0.16 * len(names) + 3.0)  # room for every column's name at a readable size
    figure = _figure(2 * side, side + 0.5)
    # a name's height within its row of the map (about 0.75 of the side over the columns), 8 pt at most
    font = max(4.0, min(8.0, 0.6 * 72 * 0.75 * side / len(names)))
    maps = [associations(schema, frame, edges) for frame in (synthetic, held_out)]
    for m in maps:  # a column with itself is 1 and says nothing: left blank, so the scale shows the pairs
        np.fill_diagonal(m, np.nan)
    top = max(0.05, float(np.nanmax(np.stack(maps)))) if len(names) > 1 else 1.0
    for k, (values, title) in enumerate(zip(maps, ("synthetic", "held-out (no noise)"))):
        ax = figure.add_subplot(1, 2, k + 1)
        image = ax.imshow(values, vmin=0, vmax=top, cmap="viridis")
        if len(names) <= 12:  # few columns: each pair's value written in its square
            for (i, j), v in np.ndenumerate(values):
                if np.isfinite(v):
                    ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7,
                            color="white" if v < 0.6 * top else "black")
        ax.set_title(f"Cramér's V, {title}", fontsize=10)
        short = [name if len(name) <= 18 else name[:17] + "…" for name in names]
        ax.set_xticks(range(len(names)), short, rotation=90, fontsize=font)
        ax.set_yticks(range(len(names)), short if k == 0 else [], fontsize=font)
    figure.suptitle("OWNER ONLY: pairwise associations (held-out rows shown without noise)", fontsize=10)
    margin = (max(len(name) for name in short) * font * 0.62 / 72 + 0.3) / (side + 0.5)  # the longest name fits
    figure.subplots_adjust(left=margin, bottom=margin, right=0.92, top=0.9, wspace=0.05)
    figure.colorbar(image, cax=figure.add_axes((0.935, 0.2, 0.015, 0.6)))
    return figure
