"""Tables on the command line: `swflow generate --table`, `swflow schema`, and sampling a table run."""
from __future__ import annotations

import argparse
import glob
import json
import sys
import time
from pathlib import Path

from ..io.outdir import staged
from ._common import UsageError


def cmd_generate_table(args) -> int:
    """`swflow generate --table PRIVATE --schema SCHEMA ...`: RUN/samples.csv (or .parquet, as the input),
    privacy.json and model.pt."""
    from ..pipeline.generate import RunRequest
    from ..pipeline.table_run import generate_table
    from ..pipeline.tables import METHODS, MODEL, TableSynthesizer

    if args.schema is None:
        raise UsageError("--table needs --schema SCHEMA.json, the table's public schema (propose one from PUBLIC "
                         "rows with `swflow schema PUBLIC.csv`)")
    if args.method not in METHODS:
        raise UsageError(f"a table is synthesized by --method {' or '.join(METHODS)} (the sliced histogram on pairs "
                         f"of columns), not {args.method}")
    for flag in ("dataset", "data", "images", "population", "checkpoint"):
        if getattr(args, flag, None) is not None:
            raise UsageError(f"--table takes no --{flag}")
    if getattr(args, "resume", False):
        raise UsageError("a table run keeps no checkpoint to resume (one release, then a fit of seconds): run it "
                         "again without --resume (--overwrite replaces a finished run)")
    if args.public_table is not None and not Path(args.public_table).is_file():
        raise UsageError(f"--public-table {args.public_table}: no such file (public rows, .csv or .parquet)")
    t0 = time.perf_counter()
    steps = {} if args.steps is None else {"steps": args.steps}
    unit = {}
    if args.privacy_unit is not None:  # the unit sets these unless one was asked otherwise (refused then)
        unit = dict(privacy_unit=args.privacy_unit, max_rows_per_unit=args.max_rows_per_unit,
                    adjacency=args.adjacency, count_noise=args.count_noise,  # a typed value the unit cannot honour
                    secure_noise=None if not args.secure_noise else True)     # is refused, never overridden
    elif args.max_rows_per_unit is not None:
        raise UsageError("--max-rows-per-unit bounds the rows of a privacy unit: name its column with --privacy-unit")
    budget = dict(adjacency=args.adjacency or "replace-one", count_noise=args.count_noise or "discrete-gaussian",
                  secure_noise=args.secure_noise)
    syn = TableSynthesizer(args.method, schema=args.schema, epsilon=args.epsilon, delta=args.delta,
                           noise_multiplier=args.noise_multiplier, **{**budget, **unit}, clip=args.clip,
                           public=args.public_table, resolution=args.resolution, cells=parse_cells(args.cells),
                           shrink=not args.no_shrink, repeated_values=args.repeated_values,
                           seed=args.seed, target=args.target,
                           privacy_seed=args.privacy_seed, **steps,
                           **({} if args.resolution_share is None else {"resolution_share": args.resolution_share}))
    private = tuple(glob.glob(args.table)) if glob.has_magic(args.table) else (args.table,)  # a folder holding
    inputs = private + (() if args.public_table is None else (args.public_table,))      # one is never replaced
    request = RunRequest(out=args.out, inputs=inputs, overwrite=args.overwrite, quiet=args.quiet)
    report = generate_table(syn, args.table, request, n_samples=args.n_samples, seed=args.seed, engine=args.engine)
    if report is not None:  # rank 0, or the one process
        suffix = ".parquet" if str(args.table).lower().endswith(".parquet") else ".csv"
        print(f"counted by {syn.engine}" + ("" if args.engine else " (--engine pandas|duckdb chooses)"))
        print(report.statement)
        print(f"wrote {request.out}/ (privacy.json, samples{suffix}, {MODEL}) in {time.perf_counter() - t0:.1f} s")
        if not syn.pairs_chosen_by.startswith("every pair"):  # a wide table's choice, or public rows': say it
            print(f"pairs: {syn.pairs_chosen_by}")
        print_rules(syn)
    return 0


def print_rules(syn) -> None:
    """Say how often the schema's rules made the samples draw again (nothing without rules)."""
    if syn.schema.rules:
        print(f"rules {[rule.text for rule in syn.schema.rules]}: {syn.rejected:.1%} of the records drawn broke one "
              "and were drawn again")


def sample_table_run(args) -> int:
    """`swflow sample RUN --n N --out DIR` on a table run: N new records from its saved release, no privacy spent."""
    from ..privacy import write_report
    from ..pipeline.tables import MODEL
    from ..pipeline.table_samples import write_samples
    from ..pipeline.verify_run import verify_run
    from ._common import say_unchecked

    run = Path(args.run_dir)
    # `swflow verify`'s checks, but the samples file (not read here) made again; the particles read where vouched
    verified = verify_run(run, public_key=args.public_key, regenerate=False, refit=False,
                          progress=not getattr(args, "quiet", False))
    say_unchecked(verified)
    if not any(check.startswith("particles: read from model.pt") for check in verified.checks):
        print(f"note: the particles were fitted again from {run}'s release; once `swflow verify {run}` has passed on "
              "this machine (or with a signed run and --public-key), `sample` reads them from model.pt in seconds",
              file=sys.stderr)
    report, syn = verified.report, verified.synthesizer
    suffix = ".parquet" if (run / "samples.parquet").exists() else ".csv"
    with staged(args.out, overwrite=args.overwrite, inputs=(run / MODEL,), resumable=False) as out:
        write_report(syn.privacy_report(), out)
        conditions = parse_conditions(args.where, syn.schema)
        write_samples(syn, out / f"samples{suffix}", args.n, seed=args.seed, conditions=conditions,
                      rules=not args.ignore_rules, progress=not getattr(args, "quiet", False))
    check = syn.privacy_report().notes.get("noise_check", "")
    if check.startswith("pair tables: UNTESTED"):
        print(f"warning: {run}: {check}", file=sys.stderr)
    print(f"{args.n} new records from {run}'s released tables (no privacy spent): {report.statement}\n"
          f"wrote {args.out}/ (privacy.json, samples{suffix})")
    print_rules(syn)
    return 0


def parse_cells(items: list[str] | None):
    """--cells: None, one number (every column), or {column: number} from COLUMN=N items."""
    if not items:
        return None
    try:
        if len(items) == 1 and "=" not in items[0]:
            return int(items[0])
        pairs = [item.rsplit("=", 1) for item in items]
        if any(len(pair) != 2 for pair in pairs):
            raise ValueError
        return {name: int(number) for name, number in pairs}
    except ValueError:
        raise UsageError(f"--cells takes one number, or COLUMN=N items, got {' '.join(items)}") from None


def parse_conditions(where: list[str], schema) -> dict:
    """{column: value} from --where COLUMN=VALUE flags, each value read as its column declares it: a category by its
    written form (an empty value is the missing one), a number as a number, a date as ISO 8601 text."""
    conditions = {}
    for item in where:
        name, sep, text = item.partition("=")
        if not sep or name not in schema.names:
            raise ValueError(f"--where takes COLUMN=VALUE with a column of the schema {schema.names}, got {item!r}")
        if name in conditions:
            raise ValueError(f"--where names {name} twice: a record holds one value of a column")
        column = schema.columns[schema.names.index(name)]
        if column.kind == "categorical":
            matches = [c for c in column.categories
                       if (c is None and text in ("", "null")) or (c is not None and str(c) == text)]
            if not matches:
                raise ValueError(f"--where {item}: {name} declares the categories "
                                 f"{['null' if c is None else c for c in column.categories]} (null: write {name}=)")
            conditions[name] = matches[0]
        elif column.temporal is not None:  # ISO 8601 text, read by the schema's check
            conditions[name] = None if text == "" else text
        else:
            try:
                conditions[name] = None if text == "" else float(text)
            except ValueError:
                raise ValueError(f"--where {item}: {name} is numeric; give a number") from None
    return conditions


def is_table_run(run_dir) -> bool:
    from ..pipeline.tables import MODEL

    return (Path(run_dir) / MODEL).exists()  # its samples are checked by verify_run (a missing file is named)


def cmd_schema(args) -> int:
    import pandas as pd

    from ..tables import Schema
    from ..tables.cells import crowded
    from ..tables.files import read_table

    public = read_table(args.public, sep=args.sep)
    schema = Schema.propose(public, max_categories=args.max_categories)
    text = json.dumps(schema.to_json(), indent=2)
    hinted = [c.name for c in schema.columns
              if c.kind == "numeric" and crowded(c, pd.to_numeric(public[c.name], errors="coerce"))]
    if hinted:  # on stderr: the schema on stdout stays plain JSON
        print(f"hint: half of the public values of {hinted} lie in under 1 % of their range: where a column is a "
              'count or an amount, declare "scale": "log" on it; where an outlier set its bound, narrow the bound '
              "(docs/tables.md)", file=sys.stderr)
    if schema.ignored:
        print(f"hint: {[i.name for i in schema.ignored]} hold free text, identifiers or codes (too many values to be "
              'categories): proposed as "type": "ignore", read and dropped by runs; each note says what else to do',
              file=sys.stderr)
    if args.out:
        if Path(args.out).exists() and not args.overwrite:
            raise UsageError(f"{args.out} exists: pass --overwrite to replace it")
        Path(args.out).write_text(text + "\n")
        ignored = f" and {len(schema.ignored)} ignored" if schema.ignored else ""
        print(f"wrote {args.out}: {len(schema.columns)} columns{ignored}; read it, then edit bounds and categories "
              "to what is publicly known")
    else:
        print(text)
    return 0


def cmd_preview(args) -> int:
    """`swflow preview PUBLIC --schema S --epsilon E [E ...]`: the quality to expect, from public rows only."""
    from ..pipeline.table_preview import preview_quality
    from ..tables import Schema
    from ..tables.files import read_table

    schema = Schema.read(args.schema)
    lines = preview_quality(read_table(args.public, schema=schema, sep=args.sep), schema, epsilons=args.epsilon,
                            delta=args.delta, target=args.target, seed=args.seed)
    if args.json:
        print(json.dumps([line.to_json() for line in lines]))
        return 0
    print(f"public rows of {args.public} run as if private ({lines[0].rows} released, the rest held back; no private "
          "row read, no privacy spent); mean 3-way TVD, lower is better:")
    for line in lines:
        auc = "" if line.auc is None else f"   AUC on {args.target}: {line.auc:.3f}"
        print(f"  {line.label:<32} {line.tvd_3way:.3f}{auc}")
    print("a private table of more rows than this half does better: a count's noise does not grow with its rows")
    return 0


def _add_source(g) -> None:
    """--table, and the engine that counts it."""
    g.add_argument("--table", metavar="PRIVATE", help="a private table (.parquet, or text: .csv, .tsv or .txt, "
                   "delimited by what its header uses, one of , ; tab |): its two-way tables on every "
                   "pair of columns are released once with --method dpswflow-hist; samples.csv (or .parquet) holds "
                   "the synthetic records")
    g.add_argument("--engine", choices=("pandas", "duckdb", "spark"), default=None,
                   help="what reads and counts the private rows: 'pandas' in this process (a file read in chunks), "
                   "'duckdb' where they are (files of any size, a glob such as 'visits/*.parquet' in quotes), "
                   "'spark' on the session's cluster (under spark-submit, or local); only the exact counts come "
                   "back, and the release is the same, count for count. Default: spark for a URI (hdfs://, s3a://, "
                   "file://), duckdb for a glob or files of 2 GB or more, else pandas (docs/tables-engines.md)")


def add_table_args(p: argparse.ArgumentParser) -> None:
    """generate's table flags (no import of torch: --help stays fast)."""
    g = p.add_argument_group("tables (--table; docs/tables.md)")
    _add_source(g)
    g.add_argument("--schema", metavar="SCHEMA.json", help="the table's public schema: every column's categories or "
                   "numeric bounds (never read from the private rows)")
    g.add_argument("--public-table", metavar="PUBLIC", help="PUBLIC rows under the same schema (.csv or .parquet), "
                   "never private ones: release only the pairs of columns they show worth their noise (wide tables: "
                   "fewer pairs, less noise on each; docs/tables-design.md). Without them: every pair up to 496 "
                   "of them; past that (about 32 columns) half of the tables from the schema (--target with every "
                   "column, else each column with the next) and half chosen privately by the data (the exponential "
                   "mechanism, a tenth of the budget) where its noise is at most n/10; else each column with its "
                   "next ones in the schema's order (write related columns side by side). Under "
                   "--privacy-unit each column also keeps its table with its rows' class, and the public rows' own "
                   "unit column, if any, is dropped unread")
    g.add_argument("--resolution", choices=("release", "public", "uniform"), default=None,
                   help="where each column's cells come from: 'release' spends --resolution-share of the budget on "
                   "fine one-way histograms and sets the cells at their quantiles (default without public rows); "
                   "'public' counts them on --public-table rows at no cost (default with them); 'uniform' takes the "
                   "schema's 16 equal-width bins")
    g.add_argument("--resolution-share", type=float, default=None,
                   help="the share of the budget (of rho) the fine one-way histograms take (default 0.3: "
                   "swflow.tables.resolution.RESOLUTION_SHARE), of what the repeated values leave where they are "
                   "named (0.9 of the budget: 0.27 then)")
    g.add_argument("--cells", nargs="+", default=None, metavar="N | COLUMN=N",
                   help="cells per column in the pair tables: one number for every column, or COLUMN=N for some "
                   "(the others by the rule; default: a rule of epsilon, n and the number of pairs for numbers, "
                   "every category, up to 256, for a category column; docs/tables-design.md)")
    g.add_argument("--no-shrink", action="store_true",
                   help="fit the released pair tables as they are, without shrinking each toward independence. "
                   "Shrinkage erases a classifier's weak dependences at small n*eps (medexp at eps 1: AUC 0.56 "
                   "without this flag, 0.60 with it) and cleans its strong ones (k401ksubs: 0.87 without, 0.85 "
                   "with); the marginals' error rises a little (docs/tables-design.md, \"Shrinkage\")")
    g.add_argument("--target", metavar="COLUMN", default=None,
                   help="a column a classifier trained on the records will predict (fraud, default, a diagnosis): "
                   "its pair with every column is released (past 496 pairs too), apart with 0.3 of the pair tables' "
                   "budget where they are fewer than 0.3 of all (less noise on them, more on the others), and fitted "
                   "as released, never shrunk toward independence, since shrinkage erases a rare class's links "
                   "first (docs/tables-design.md, \"Rare classes\" and \"The target's tables apart\")")
    g.add_argument("--repeated-values", action=argparse.BooleanOptionalAction, default=None,
                   help="name the values that many records of a sliced real column share exactly, privately (a "
                   "tenth of the budget and a tenth of delta: partition selection), so that each decodes as itself "
                   "rather than spread over its slice (a payment of 1000 written as its logarithm, whole dollars in "
                   "a real column; medexp at eps 10: 3-way TVD 0.199 -> 0.143). Default: on for a run per row, off "
                   "under --privacy-unit, where a unit names at most one value of a column (none reached the "
                   "threshold on the benchmark's unit tables). --no-repeated-values turns it off (the trees and the "
                   "pair tables then split the whole budget), --repeated-values on under a unit too")
    g.add_argument("--privacy-unit", metavar="COLUMN", default=None,
                   help="protect one unit of this identifier column (a customer, a patient) and ALL of its rows, not "
                   "one row: add/remove of a unit, each unit's rows weighted to count as at most --max-rows-per-unit "
                   "rows (the noise grows with it), continuous Gaussian noise from the OS CSPRNG. The column groups "
                   "rows only: leave it out of the schema; it is never synthesized or written (docs/tables.md, "
                   "\"The unit of privacy\")")
    g.add_argument("--max-rows-per-unit", metavar="K", type=int, default=None,
                   help="with --privacy-unit: the rows a unit counts as at most (default 4: "
                   "swflow.privacy.units.DEFAULT_ROWS_PER_UNIT); a unit with more has each row weighted K / its rows")
    g.add_argument("--n-samples", type=int, default=None, help="synthetic records to write (default: as many as the "
                   "private table has rows, n being public; under add-remove, its released count; under "
                   "--privacy-unit, as many rows as the release tells of, the number of rows being private)")


def register(sub) -> None:
    p = sub.add_parser("schema", help="propose a table's schema from PUBLIC rows",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                       description="Read a PUBLIC table (.csv or .parquet) and print a schema: numbers with their "
                       "observed range (integer when every value is whole), dates and datetimes (datetime values or "
                       "ISO 8601 text) with theirs (a datetime counted in hours or minutes where every value is a "
                       "whole one, so samples come back so), other columns with their observed categories (a missing value as "
                       "the category null; codes written with leading zeros, such as zip codes, stay text). Never run it on private rows: their range "
                       "and categories are private statistics. Edit the result to what is publicly known, then pass "
                       "it to `swflow generate --table PRIVATE --schema SCHEMA.json`. A hint on stderr names the "
                       "numeric columns whose values crowd into a corner of their range: declare \"scale\": \"log\" "
                       "on those that are counts or amounts.")
    p.add_argument("public", help="a public table: .csv or .parquet")
    p.add_argument("--out", help="write the schema here (default: print it)")
    p.add_argument("--max-categories", type=int, default=64,
                   help="a non-numeric column with more distinct values is proposed as ignored (free text, "
                   "identifiers)")
    p.add_argument("--sep", default=None, help="the text file's delimiter (e.g. ';' or $'\\t'; default: read from its "
                   "header, one of , ; tab |, and a tab for .tsv)")
    p.add_argument("--overwrite", action="store_true")
    p.set_defaults(func=cmd_schema)
    v = sub.add_parser("preview", help="the quality to expect at a few epsilons, from PUBLIC rows only",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                       description="Before any private row is used: split PUBLIC rows in two halves, release one at "
                       "each --epsilon exactly as `swflow generate --table` releases a private table, and score the "
                       "samples against the other half (mean 3-way TVD; with --target, a classifier's AUC), beside "
                       "the floor (the first half itself) and independent columns. No private row is read and no "
                       "privacy is spent; a larger private table does better than the half.")
    v.add_argument("public", help="public rows (.csv or .parquet) under the schema")
    v.add_argument("--schema", required=True, metavar="SCHEMA.json", help="the table's public schema")
    v.add_argument("--epsilon", type=float, nargs="+", default=[1.0, 10.0], help="the epsilons to preview")
    v.add_argument("--delta", type=float, default=1e-9, help="delta of the preview's releases (capped below 1/n)")
    v.add_argument("--target", metavar="COLUMN", default=None, help="score a classifier's AUC on this column")
    v.add_argument("--seed", type=int, default=0, help="the split's and the releases' seed (public rows only)")
    v.add_argument("--sep", default=None, help="the text file's delimiter (default: read from its header)")
    v.add_argument("--json", action="store_true", help="print one JSON list")
    v.set_defaults(func=cmd_preview)
