"""A made-up table with a public schema, for examples, tests and smoke runs (no real person in it).

Five columns with dependence between them (age drives education and hours, both drive income), so that
independent columns are a visibly wrong answer. Deterministic given its seed.
"""
from __future__ import annotations

import numpy as np

from .schema import Schema

__all__ = ["example_table", "EXAMPLE_SCHEMA"]

EXAMPLE_SCHEMA = {"columns": [
    {"name": "age", "type": "numeric", "min": 18, "max": 80, "integer": True},
    {"name": "education", "type": "categorical", "categories": ["school", "college", "degree", None]},
    {"name": "hours", "type": "numeric", "min": 0, "max": 80, "integer": True},
    {"name": "sector", "type": "categorical", "categories": ["public", "private", "self"]},
    {"name": "income", "type": "categorical", "categories": ["low", "high"]}]}


def example_table(n: int = 2000, *, seed: int = 0):
    """(a DataFrame of ``n`` made-up records, its :class:`~swflow.tables.schema.Schema`)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    age = np.clip(rng.normal(42, 13, n), 18, 80).round().astype(np.int64)
    level = np.clip(((age - 18) / 25 + rng.normal(0, 0.8, n)).round(), 0, 2).astype(int)
    education = np.array(["school", "college", "degree"], dtype=object)[level]
    education[rng.uniform(size=n) < 0.03] = None  # declared missing
    sector = np.array(["public", "private", "self"], dtype=object)[
        np.where(level == 2, rng.choice(3, n, p=[0.5, 0.4, 0.1]), rng.choice(3, n, p=[0.2, 0.65, 0.15]))]
    hours = np.clip(rng.normal(np.where(sector == "self", 50, 38), 8, n), 0, 80).round().astype(np.int64)
    odds = -4.0 + 1.2 * level + 0.04 * (hours - 40) + 0.03 * (age - 40) + 0.8 * (sector == "self")
    income = np.where(rng.uniform(size=n) < 1 / (1 + np.exp(-odds)), "high", "low").astype(object)
    frame = pd.DataFrame({"age": age, "education": education, "hours": hours, "sector": sector, "income": income})
    return frame, Schema.from_json(EXAMPLE_SCHEMA)
