"""Rules between columns, declared in the schema and kept by the samples: ``{"rules": ["start <= end"]}``.

A rule compares a column with another column or with a number: ``LEFT OP RIGHT``, OP one of ``<= < >= > == !=``;
or ties two conditions: ``if CONDITION then CONDITION``, a condition a comparison or a categorical column's values
(``if breed in {poodle, beagle} then species in {dog}``, ``if age < 16 then marital == never``).
Numbers, dates and datetimes compare by value (dates and datetimes as the instants they are, whatever unit each
column counts in: a date is its midnight, so ``admitted <= discharged_at`` reads as it is written); a date or a
datetime only with another date or datetime; categorical columns only by ``==`` and ``!=`` with another column. A
record whose value on either side is missing keeps the rule (there is nothing to compare).

The samples keep the rules by resampling: records that break one are drawn again from the particles (post-
processing: no privacy is spent), and the share drawn again is reported. The private rows are not checked against
the rules: nothing in the release depends on them, and a rule the private rows often break is a rule the released
tables give little support, which the rejection rate shows.
"""
from __future__ import annotations

import operator
import re
from dataclasses import dataclass

import numpy as np

__all__ = ["Rule", "Among", "Implication", "parse_rule", "check_consistent", "RulesUnkept"]

_OPERATORS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt, "==": operator.eq,
              "!=": operator.ne}
_PATTERN = re.compile(r"^\s*(.+?)\s*(<=|>=|==|!=|<|>)\s*(.+?)\s*$")


@dataclass(frozen=True)
class Rule:
    """``left op right``: ``left`` a column's name, ``right`` a column's name or a number (module docstring)."""

    left: str
    op: str
    right: str | float
    #: seconds in one of each side's numbers where both are dates or datetimes (a date's day, an hourly column's
    #: hour), so that columns counted in different units compare as instants; 1 for plain numbers
    scales: tuple[int, int] = (1, 1)

    @property
    def text(self) -> str:
        right = self.right if isinstance(self.right, str) else f"{self.right:g}"
        return f"{self.left} {self.op} {right}"

    def holds(self, checked) -> np.ndarray:
        """(n,) bool: where the records of ``checked`` (a frame as Schema.check returns it: numbers for numeric,
        date and datetime columns) keep the rule; a missing value on either side keeps it."""
        import pandas as pd

        left = checked[self.left]
        right = checked[self.right] if isinstance(self.right, str) else pd.Series(self.right, index=checked.index)
        present = (left.notna() & right.notna()).to_numpy()
        out = np.ones(len(checked), dtype=bool)
        out[present] = _OPERATORS[self.op](left[present].to_numpy() * self.scales[0],
                                           right[present].to_numpy() * self.scales[1])
        return out

    def applies(self, checked) -> np.ndarray:
        """(n,) bool: where the records meet this comparison as a condition (both sides present, and it holds)."""
        import pandas as pd

        right = checked[self.right] if isinstance(self.right, str) else pd.Series(self.right, index=checked.index)
        return self.holds(checked) & (checked[self.left].notna() & right.notna()).to_numpy()


@dataclass(frozen=True)
class Among:
    """``column in {values}`` (``negated``: not in): a categorical column's value among some of its categories (None:
    the missing value, written ``null``)."""

    column: str
    values: tuple
    negated: bool = False

    @property
    def text(self) -> str:
        shown = ", ".join("null" if v is None else str(v) for v in self.values)
        return f"{self.column} {'not in' if self.negated else 'in'} {{{shown}}}"

    def holds(self, checked) -> np.ndarray:
        """(n,) bool: where the value is (not) among ``values``."""
        column = checked[self.column]
        inside = column.isin([v for v in self.values if v is not None]).to_numpy()
        if None in self.values:
            inside |= column.isna().to_numpy()
        return ~inside if self.negated else inside

    applies = holds  # as a condition: the same


@dataclass(frozen=True)
class Implication:
    """``if CONDITION then CONSEQUENCE``: a record that meets the condition keeps the consequence ("this breed only
    with that species": ``if breed in {poodle, beagle} then species in {dog}``). Each side is a comparison
    (:class:`Rule`) or a membership (:class:`Among`); a comparison with a missing value does not meet a condition."""

    condition: object
    consequence: object

    @property
    def text(self) -> str:
        return f"if {self.condition.text} then {self.consequence.text}"

    def holds(self, checked) -> np.ndarray:
        return ~self.condition.applies(checked) | self.consequence.holds(checked)


_IMPLIES = re.compile(r"^\s*if\s+(.+?)\s+then\s+(.+?)\s*$", re.IGNORECASE)
_AMONG = re.compile(r"^\s*(.+?)\s+(not\s+in|in)\s*\{(.*)\}\s*$", re.IGNORECASE)
_EQUALS = re.compile(r"^\s*(.+?)\s*(==|!=)\s*(.+?)\s*$")


def parse_rule(text, columns: dict):
    """The rule written as ``text`` (a :class:`Rule`, or an :class:`Implication` ``if ... then ...``), checked
    against ``columns`` ({name: Column}). Raises ValueError saying what a rule may be."""
    implied = _IMPLIES.match(text) if isinstance(text, str) else None
    if implied:
        return Implication(*(_condition(part, columns, text) for part in implied.groups()))
    return _comparison(text, columns)


def _condition(part: str, columns: dict, text: str):
    """One side of an implication: ``COLUMN in {...}``, ``COLUMN == VALUE`` on a categorical column, or a
    comparison."""
    among, equals = _AMONG.match(part), _EQUALS.match(part)
    if among or (equals and equals.group(1) in columns and columns[equals.group(1)].kind == "categorical"
                 and equals.group(3) not in columns):
        name, word, values = among.groups() if among else (equals.group(1), equals.group(2), equals.group(3))
        if name not in columns or columns[name].kind != "categorical":
            raise ValueError(f"rule {text!r}: {name!r} is not a categorical column of the schema (a membership "
                             "names one)")
        declared = {"null" if c is None else str(c): c for c in columns[name].categories}
        found = [v.strip().strip("'\"") for v in values.split(",") if v.strip()]
        unknown = [v for v in found if v not in declared]
        if unknown or not found:
            raise ValueError(f"rule {text!r}: {unknown or 'nothing'} among {name!r}'s values, whose categories are "
                             f"{sorted(declared)}")
        return Among(name, tuple(declared[v] for v in found), negated=word.lower().startswith("not") or word == "!=")
    return _comparison(part, columns)


def _comparison(text, columns: dict) -> Rule:
    if not isinstance(text, str) or not (match := _PATTERN.match(text)):
        raise ValueError(f"a rule is text 'COLUMN OP COLUMN' or 'COLUMN OP NUMBER', OP one of "
                         f"{' '.join(_OPERATORS)}, or 'if CONDITION then CONDITION' (a condition such as "
                         "'species in {cat, dog}'); got {text!r}")
    left, op, right = match.groups()
    if left not in columns:
        raise ValueError(f"rule {text!r}: {left!r} is not a column of the schema")
    if right not in columns:
        try:
            right = float(right)
        except ValueError:
            raise ValueError(f"rule {text!r}: {right!r} is neither a column of the schema nor a number") from None
    kinds = {columns[name].kind for name in (left, right) if isinstance(name, str)}
    if "categorical" in kinds and (op not in ("==", "!=") or kinds != {"categorical"} or not isinstance(right, str)):
        raise ValueError(f"rule {text!r}: a categorical column is compared only with another one, by == or !=")
    temporal = [isinstance(name, str) and columns[name].temporal is not None for name in (left, right)]
    if temporal[0] != temporal[1]:
        raise ValueError(f"rule {text!r}: a date or datetime column is compared with another date or datetime "
                         "column, not a number or a numeric column")
    if not temporal[0]:
        return Rule(left, op, right)
    from .types import unit_seconds

    return Rule(left, op, right, tuple(unit_seconds(columns[c].temporal, columns[c].unit) for c in (left, right)))


#: a sample whose records break the rules more often than this is refused: the release gives the rules no support
MAX_REJECTION = 0.99


class RulesUnkept(ValueError):
    """The released law gives the schema's rules almost no support: samples cannot keep them."""


def keep_rules(draw, n: int, schema, *, seed: int):
    """(n records keeping every rule of ``schema``, the share of the records drawn that broke a rule): ``draw(k,
    seed)`` returns k records (a DataFrame); records breaking a rule are drawn again with new public seeds. The share
    counts every record checked, those drawn beyond the n needed included (they are checked like the others), so it
    estimates the rate at which the released law breaks the rules. Refused when more than MAX_REJECTION of the
    records drawn break a rule (the released tables give the rules no support)."""
    import pandas as pd

    def keeps(frame) -> np.ndarray:
        checked = schema.check(frame)
        return np.logical_and.reduce([rule.holds(checked) for rule in schema.rules])

    frame = draw(n, seed)
    if not schema.rules:
        return frame, 0.0
    holds = keeps(frame)
    kept, drawn, broken, attempt = [frame[holds]], n, int((~holds).sum()), 0
    while (missing := n - sum(len(part) for part in kept)) > 0:
        if drawn >= 100 * n and broken / drawn > MAX_REJECTION:
            raise RulesUnkept(f"{broken / drawn:.1%} of the records drawn break the schema's rules "
                             f"{[rule.text for rule in schema.rules]}: the released tables give them almost no "
                             "support; loosen or drop a rule")
        attempt += 1
        more = draw(max(missing, min(n, 1000)), seed + 7919 * attempt)  # public seeds, one per round
        holds = keeps(more)
        kept.append(more[holds])
        drawn, broken = drawn + len(more), broken + int((~holds).sum())
    return pd.concat(kept, ignore_index=True).iloc[:n].reset_index(drop=True), broken / drawn


def check_consistent(rules, columns: dict) -> None:
    """Refuse ``rules`` that no record can keep, from the schema alone (before any private row is read: found at
    sampling, after the release, such rules cost a run). The order rules between numeric, date and datetime columns
    that may not be missing, with their bounds, are difference constraints on the values (as instants: each column
    times its scale); they hold together unless some cycle of them sums below zero, or to zero through a strict one
    (Floyd–Warshall). Rules on columns that may be missing, ``!=`` and categories never contradict this way (a missing
    value keeps every rule); integrality is ignored, so the check refuses only what is certainly empty."""
    import math

    rules = [rule for rule in rules if isinstance(rule, Rule)]  # an implication never empties the set alone
    nodes = ["0"] + [name for name, c in columns.items() if c.kind != "categorical" and not c.missing]
    index = {name: i for i, name in enumerate(nodes)}
    size = len(nodes)
    bound = [[(math.inf, False)] * size for _ in range(size)]  # bound[u][v]: x_v − x_u ≤ w (strict: <)

    def tighten(u: int, v: int, w: float, strict: bool) -> None:
        if (w, not strict) < (bound[u][v][0], not bound[u][v][1]):
            bound[u][v] = (w, strict)

    scales = {}
    for rule in rules:
        scales.setdefault(rule.left, rule.scales[0])
        if isinstance(rule.right, str):
            scales.setdefault(rule.right, rule.scales[1])
    for name in nodes[1:]:
        column, scale = columns[name], scales.get(name, 1)
        tighten(0, index[name], column.high * scale, False)
        tighten(index[name], 0, -column.low * scale, False)
    for rule in rules:
        names = [rule.left] + ([rule.right] if isinstance(rule.right, str) else [])
        if rule.op == "!=" or any(name not in index for name in names):
            continue
        left = index[rule.left]
        right, value = (index[rule.right], 0.0) if isinstance(rule.right, str) else (0, rule.right * rule.scales[1])
        if rule.op in ("<=", "<", "=="):  # left − right ≤ value
            tighten(right, left, value, rule.op == "<")
        if rule.op in (">=", ">", "=="):  # right − left ≤ −value
            tighten(left, right, -value, rule.op == ">")
    for k in range(size):
        for u in range(size):
            for v in range(size):
                w = bound[u][k][0] + bound[k][v][0]
                if math.isfinite(w):
                    tighten(u, v, w, bound[u][k][1] or bound[k][v][1])
    if any(bound[v][v][0] < -1e-9 * (1 + abs(bound[v][v][0])) or (bound[v][v][0] <= 0 and bound[v][v][1])
           for v in range(size)):
        raise ValueError(f"the rules {[rule.text for rule in rules]} contradict each other, or the columns' bounds: "
                         "no record can keep them all; correct them before any run")

