"""Defects the 80-case probe found (issue 76), each with a test that fails on the code before its fix."""
import re

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from swflow.tables import Schema
from swflow.tables.rules import keep_rules

RULED = Schema.from_json({"columns": [{"name": "start", "type": "numeric", "min": -10, "max": 10},
                                      {"name": "end", "type": "numeric", "min": -10, "max": 10}],
                          "rules": ["start <= end"]})


@pytest.mark.parametrize("n", [500, 2000, 20000])
def test_the_rule_rejection_share_is_the_rate_records_break_a_rule(n):
    """Records whose end is start + N(0.3, 0.35²) break 'start <= end' at Φ(−0.3/0.35) = 0.196; the reported share
    is that rate within five standard deviations of the records checked (it read 50 % at n = 500, counting the
    records drawn beyond the n needed as broken)."""
    def draw(count, seed):
        rng = np.random.default_rng(seed)
        start = rng.uniform(-5, 5, count)
        return pd.DataFrame({"start": start, "end": start + rng.normal(0.3, 0.35, count)})

    frame, rejected = keep_rules(draw, n, RULED, seed=0)
    truth = float(norm.cdf(-0.3 / 0.35))
    assert len(frame) == n and (frame["start"] <= frame["end"]).all()
    assert abs(rejected - truth) < 5 * np.sqrt(truth * (1 - truth) / n)


def test_a_table_without_rules_reports_no_rejection():
    frame, rejected = keep_rules(lambda count, seed: pd.DataFrame({"start": [0.0] * count, "end": [1.0] * count}),
                                 10, Schema(RULED.columns), seed=0)
    assert rejected == 0.0 and len(frame) == 10


def test_a_csv_that_cannot_be_parsed_is_refused_without_a_row_position(tmp_path):
    """pandas says "Expected 2 fields in line 51, saw 3": the line of a private row. The error names the file and
    what to check, never where."""
    from swflow.tables.files import read_table

    path = tmp_path / "private.csv"
    path.write_text("start,end\n" + "1,2\n" * 49 + "1,2,3\n" + "1,2\n" * 10)
    with pytest.raises(ValueError) as err:
        read_table(path, schema=RULED)
    message = str(err.value).replace(str(path), "FILE")  # the temporary folder's own name may hold any number
    assert "line" not in message and "51" not in message and "50" not in message
    assert str(err.value).startswith(str(path)) and "fields" in message


def test_a_declared_category_that_looks_missing_comes_back_as_itself(tmp_path):
    """"NA" (Namibia) and "None" as declared categories are read as those categories, not as missing values; an
    empty field and the usual markers stay missing where the schema allows it."""
    from swflow.tables.files import read_table

    schema = Schema.from_json({"columns": [
        {"name": "country", "type": "categorical", "categories": ["NA", "ZA", None]},
        {"name": "answer", "type": "categorical", "categories": ["None", "Some"]},
        {"name": "x", "type": "numeric", "min": 0, "max": 10, "missing": True}]})
    path = tmp_path / "t.csv"
    path.write_text("country,answer,x,id\nNA,None,1,a\nZA,Some,NA,NA\n,None,,b\n")
    frame = read_table(path, schema=schema)
    assert frame["country"].tolist()[:2] == ["NA", "ZA"] and pd.isna(frame["country"].iloc[2])
    assert frame["answer"].tolist() == ["None", "Some", "None"]
    assert pd.isna(frame["x"].iloc[1]) and pd.isna(frame["x"].iloc[2]) and pd.isna(frame["id"].iloc[1])
    checked = schema.check(frame.drop(columns=["id"]))
    assert checked["country"].tolist()[:2] == ["NA", "ZA"]


def test_an_add_remove_refusal_of_delta_prints_no_count_of_records():
    """Under add/remove n is private: δ too large for the released count is refused without the count (each try
    drew a fresh one and printed 1/n̂)."""
    from swflow.pipeline.tables import TableSynthesizer
    from swflow.tables import example_table

    frame, schema = example_table(300)
    for _ in range(3):
        with pytest.raises(ValueError) as err:
            TableSynthesizer(schema=schema, epsilon=1.0, delta=0.01, adjacency="add-remove",
                             count_noise="gaussian").fit(frame)
        assert "whole record" in str(err.value)
        assert set(re.findall(r"[0-9][0-9.e-]*", str(err.value))) <= {"0.01", "1"}  # δ and "1/n" only


@pytest.mark.parametrize("rules, contradict", [
    (["start <= end"], False), (["start < end", "end < start"], True), (["start <= end", "end <= start"], False),
    (["start <= end", "end < start"], True), (["start > 8", "end >= start", "end < 5"], True),
    (["start > 10"], True), (["start >= 10"], False), (["start != end", "end != start"], False),
    (["start < end", "end < later", "later < start"], True), (["start < end", "end < later"], False)])
def test_rules_that_no_record_can_keep_are_refused_with_the_schema(rules, contradict):
    """Found before any private row is read (it was found at sampling, after the release): order rules that form a
    strict cycle, or that the bounds leave no room for. A column that may be missing keeps every rule."""
    from swflow.tables import SchemaError

    columns = [{"name": n, "type": "numeric", "min": -10, "max": 10} for n in ("start", "end", "later")]
    if contradict:
        with pytest.raises(SchemaError, match="contradict"):
            Schema.from_json({"columns": columns, "rules": rules})
        columns[0]["missing"] = True  # a record missing start keeps every rule on it
        columns[1]["missing"] = True
        Schema.from_json({"columns": columns, "rules": rules})
    else:
        Schema.from_json({"columns": columns, "rules": rules})


def test_a_column_named_twice_in_where_is_refused():
    from swflow.cli.tables import parse_conditions

    schema = Schema(RULED.columns)
    assert parse_conditions(["start=1"], schema) == {"start": 1.0}
    with pytest.raises(ValueError, match="twice"):
        parse_conditions(["start=1", "start=2"], schema)


def test_a_boolean_series_for_a_numeric_column_is_refused_with_what_to_declare():
    from swflow.tables import SchemaError

    with pytest.raises(SchemaError, match="categorical"):
        Schema(RULED.columns).check(pd.DataFrame({"start": [True, False], "end": [1.0, 2.0]}))


def test_the_target_s_positive_class_is_stated():
    """`evaluate --target` says which class its AUC is of (issue 76: it did not)."""
    from swflow.tables.example import example_table
    from swflow.tables.metrics import efficacy

    frame, schema = example_table(600, seed=1)
    named = efficacy(schema, frame.iloc[:300], frame.iloc[300:], "income")["positive_class"]
    assert named.startswith("income = 'high'")
    assert "top decile" in efficacy(schema, frame.iloc[:300], frame.iloc[300:], "hours")["positive_class"]


def test_no_budget_is_spent_naming_values_a_log_column_cannot_keep():
    """A real column on a log scale fills its tree, so its named values were always discarded (issue 76): the run
    names none there and spends no share on them; the same column on a linear scale still has its values named."""
    import numpy as np

    from swflow.pipeline.tables import TableSynthesizer
    from swflow.tables.example import example_table

    frame, schema = example_table(800, seed=2)
    frame["pay"] = np.round(np.random.default_rng(0).lognormal(7, 1, 800), 2)
    for scale, events in (("log", 2), ("linear", 3)):
        columns = schema.to_json()["columns"] + [{"name": "pay", "type": "numeric", "min": 0, "max": 100000,
                                                  "scale": scale}]
        syn = TableSynthesizer(schema={"columns": columns}, epsilon=1.0, delta=1e-7, count_noise="gaussian",
                               steps=10).fit(frame)
        ledger = syn.privacy_report().ledger
        assert len(ledger) == events, scale  # pairs, [values,] trees
        assert syn.privacy_report().run_config["repeated_values_columns"] == ([] if scale == "log" else ["pay"])


def test_resume_on_a_table_run_is_refused_with_what_to_do(tmp_path, capsys):
    import json

    from swflow.cli import main
    from swflow.tables.example import example_table

    frame, schema = example_table(300, seed=1)
    frame.to_csv(tmp_path / "t.csv", index=False)
    (tmp_path / "s.json").write_text(json.dumps(schema.to_json()))
    argv = ["generate", "--table", str(tmp_path / "t.csv"), "--schema", str(tmp_path / "s.json"), "--epsilon", "1",
            "--delta", "1e-7", "--out", str(tmp_path / "run"), "--resume"]
    assert main(argv) == 2
    assert "keeps no checkpoint" in capsys.readouterr().err and not (tmp_path / "run").exists()


def test_a_wide_table_s_choice_of_pairs_is_said_at_run_time(tmp_path, capsys):
    import json

    import numpy as np
    import pandas as pd

    from swflow.cli import main

    columns = [{"name": f"c{j}", "type": "categorical", "categories": ["a", "b"]} for j in range(34)]
    rng = np.random.default_rng(0)
    pd.DataFrame({c["name"]: rng.choice(["a", "b"], 300) for c in columns}).to_csv(tmp_path / "t.csv", index=False)
    (tmp_path / "s.json").write_text(json.dumps({"columns": columns}))
    assert main(["generate", "--table", str(tmp_path / "t.csv"), "--schema", str(tmp_path / "s.json"), "--epsilon",
                 "1", "--delta", "1e-7", "--steps", "5", "--out", str(tmp_path / "run"), "--quiet"]) == 0
    assert "pairs: the schema alone: each column with its next" in capsys.readouterr().out


def test_an_os_error_says_what_to_do():
    import errno

    from swflow.cli import _os_hint

    assert "permissions" in _os_hint(PermissionError(errno.EACCES, "Permission denied"))
    assert "disk is full" in _os_hint(OSError(errno.ENOSPC, "No space left on device"))
    assert _os_hint(ValueError("bad")) == ""


def test_privacy_json_says_whether_values_were_clipped():
    from swflow.pipeline.tables import TableSynthesizer
    from swflow.tables.example import example_table

    frame, schema = example_table(300, seed=4)
    said = {clip: TableSynthesizer(schema=schema, epsilon=1.0, delta=1e-7, steps=5, clip=clip).fit(frame)
            .privacy_report().to_json()["run_config"]["clipped"] for clip in (True, False)}
    assert said[True].startswith("clipped to the schema's bounds") and "not published" in said[True]
    assert said[False].startswith("none")


def test_a_free_text_column_is_proposed_as_ignored_and_left_out_of_the_run(tmp_path, capsys):
    """One free-text or identifier column no longer makes `swflow schema` refuse the file: it is proposed as
    "ignore" with what to do, read with the rows and dropped, never released nor written (issue 76)."""
    import json

    import pandas as pd

    from swflow.cli import main
    from swflow.tables.example import example_table

    frame, _ = example_table(500, seed=3)
    frame["comment"] = [f"free text number {i}" for i in range(500)]
    frame["paid"] = [f"${i},{i % 1000:03d}.50" for i in range(500)]
    frame.iloc[:200].to_csv(tmp_path / "public.csv", index=False)
    frame.iloc[200:].to_csv(tmp_path / "private.csv", index=False)
    assert main(["schema", str(tmp_path / "public.csv"), "--out", str(tmp_path / "schema.json")]) == 0
    entries = {c["name"]: c for c in json.loads((tmp_path / "schema.json").read_text())["columns"]}
    assert entries["comment"]["type"] == "ignore" and "identifier" in entries["comment"]["note"]
    assert entries["paid"]["type"] == "ignore" and "plain numbers" in entries["paid"]["note"]
    assert main(["generate", "--table", str(tmp_path / "private.csv"), "--schema", str(tmp_path / "schema.json"),
                 "--epsilon", "1", "--delta", "1e-7", "--steps", "5", "--out", str(tmp_path / "run"), "--quiet"]) == 0
    samples = pd.read_csv(tmp_path / "run" / "samples.csv")
    assert "comment" not in samples.columns and "paid" not in samples.columns
    written = b"".join(p.read_bytes() for p in (tmp_path / "run").iterdir())
    assert b"free text number" not in written


def test_a_formatted_number_or_a_missing_marker_is_named_as_such_without_its_value():
    import pandas as pd
    import pytest

    from swflow.tables import Schema

    schema = Schema.from_json({"columns": [{"name": "x", "type": "numeric", "min": 0, "max": 10 ** 6}]})
    with pytest.raises(ValueError, match="thousands separators") as err:
        schema.check(pd.DataFrame({"x": ["1,234", "12"]}))
    assert "1,234" in str(err.value)  # the generic example, never the row's own text: this row holds 1,234 too
    with pytest.raises(ValueError, match="text marker of a missing value"):
        schema.check(pd.DataFrame({"x": ["?", "12"]}))


def test_an_ordered_category_comes_back_ordered():
    import pandas as pd

    from swflow.pipeline.tables import TableSynthesizer
    from swflow.tables import Schema
    from swflow.tables.example import example_table

    frame, _ = example_table(600, seed=5)
    frame["income"] = pd.Categorical(frame["income"], categories=["low", "high"], ordered=True)
    schema = Schema.propose(frame)
    assert schema.columns[schema.names.index("income")].dtype == "ordered category"
    back = TableSynthesizer(schema=schema, epsilon=1.0, delta=1e-7, steps=5).fit(frame).sample(50, seed=0)["income"]
    assert back.cat.ordered and list(back.cat.categories) == ["low", "high"]


def test_bounds_far_wider_than_the_released_mass_are_warned_of():
    import numpy as np
    import pytest

    from swflow.pipeline.tables import TableSynthesizer
    from swflow.tables.example import example_table

    frame, schema = example_table(2000, seed=6)
    frame["spend"] = np.round(np.random.default_rng(0).lognormal(3, 0.5, 2000), 2)  # about 20, bounds to a million
    columns = schema.to_json()["columns"]
    for high, warned in ((10 ** 6, True), (100, False)):
        wide = {"columns": columns + [{"name": "spend", "type": "numeric", "min": 0, "max": high}]}
        with pytest.warns(UserWarning) if warned else _no_wide_warning():
            TableSynthesizer(schema=wide, epsilon=10.0, delta=1e-7, count_noise="gaussian", steps=5).fit(frame)


def _no_wide_warning():
    import contextlib
    import warnings

    @contextlib.contextmanager
    def watch():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
        assert not [w for w in caught if "declared bounds" in str(w.message)]
    return watch()


def test_the_owner_s_bars_read_in_order_and_a_wide_column_shows_its_largest_categories():
    """Whole-number categories in numeric order, the missing value last; a column of 40 categories shows its 29
    largest held-out shares and one bar for the rest, whose shares still sum to one (issue 76)."""
    import numpy as np

    from swflow.tables.report import MAX_BARS, _shown_categories
    from swflow.tables.schema import Column

    column = Column("kids", "categorical", categories=(3, 1, 2, None))
    labels, (synthetic, held) = _shown_categories(column, ["3", "1", "2", "(missing)"],
                                                  [np.array([.3, .1, .2, .4])] * 2)
    assert labels == ["1", "2", "3", "(missing)"] and list(held) == [.1, .2, .3, .4]
    wide = Column("city", "categorical", categories=tuple(f"c{i}" for i in range(40)))
    shares = np.arange(40) / np.arange(40).sum()
    labels, (synthetic, held) = _shown_categories(wide, list(wide.categories), [shares, shares])
    assert len(labels) == MAX_BARS and labels[-1] == "(11 others)" and "c39" in labels and "c0" not in labels
    assert np.isclose(held.sum(), 1.0)


def test_a_csv_with_a_delimiter_at_the_end_of_each_line_reads_as_written(tmp_path):
    """"a,b," made a third column "Unnamed: 2" that the schema refused; rows with one more field than the header
    made pandas take their first column as the index, shifting every value (issue 76)."""
    import warnings

    from swflow.tables import Schema
    from swflow.tables.files import TableRows, read_table
    from swflow.tables.codec import TableCodec

    schema = Schema.from_json({"columns": [{"name": "a", "type": "numeric", "min": 0, "max": 10},
                                           {"name": "b", "type": "categorical", "categories": ["x", "y"]}]})
    expected = {"a": [1.0, 2.0, 3.0], "b": ["x", "y", "x"]}
    for name, text in (("both.csv", "a,b,\n1,x,\n2,y,\n3,x,\n"), ("rows.csv", "a,b\n1,x,\n2,y,\n3,x,\n")):
        (tmp_path / name).write_text(text)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pandas warns of the extra field it leaves out
            frame = schema.check(read_table(tmp_path / name, schema=schema))
            chunks = [f for _, f in TableRows(tmp_path / name, TableCodec(schema)).checked_frames()]
        assert {c: frame[c].tolist() for c in frame.columns} == expected
        assert chunks[0]["a"].tolist() == expected["a"]


def test_decimal_numbers_and_pandas_strings_are_proposed_and_come_back_as_they_should():
    """A column of decimal.Decimal was proposed as categories holding Decimal objects, which no JSON can write; a
    pandas string column came back as object (issue 76)."""
    import decimal
    import json

    import pandas as pd

    from swflow.pipeline.tables import TableSynthesizer
    from swflow.tables import Schema

    frame = pd.DataFrame({"s": pd.Series(["a", "b", "c"] * 100, dtype="string"),
                          "d": [decimal.Decimal("1.25") * (i % 40) for i in range(300)]})
    schema = Schema.propose(frame)
    written = json.loads(json.dumps(schema.to_json()))
    assert written["columns"][1]["type"] == "numeric" and written["columns"][1]["decimals"] == 2
    back = TableSynthesizer(schema=Schema.from_json(written), epsilon=1.0, delta=1e-7, steps=5).fit(frame).sample(
        20, seed=0)
    assert isinstance(back["s"].dtype, pd.StringDtype) and back["d"].dtype == float


def test_where_keeps_the_declared_precision():
    """A condition finer than its column's declared precision is refused where every condition is checked
    (TableSynthesizer.sample, which --where calls), whole numbers and decimal places alike."""
    import pandas as pd
    import pytest

    from swflow.cli.tables import parse_conditions
    from swflow.pipeline.tables import TableSynthesizer
    from swflow.tables import Schema

    schema = Schema.from_json({"columns": [{"name": "price", "type": "numeric", "min": 0, "max": 100, "decimals": 2},
                                           {"name": "age", "type": "numeric", "min": 0, "max": 100, "integer": True}]})
    assert parse_conditions(["price=12.25", "age=40"], schema) == {"price": 12.25, "age": 40.0}
    frame = pd.DataFrame({"price": [12.25, 40.5, 80.75] * 100, "age": [20, 40, 60] * 100})
    syn = TableSynthesizer(schema=schema, epsilon=10.0, delta=1e-7, steps=5).fit(frame)
    assert (syn.sample(10, seed=0, conditions={"price": 12.25})["price"] == 12.25).all()
    with pytest.raises(ValueError, match="2 decimal places"):
        syn.sample(10, seed=0, conditions=parse_conditions(["price=12.255"], schema))
    with pytest.raises(ValueError, match="whole numbers"):
        syn.sample(10, seed=0, conditions=parse_conditions(["age=40.5"], schema))

def test_spaces_around_a_text_value_or_a_name_are_dropped_on_both_sides(tmp_path):
    """read_csv's skipinitialspace dropped the spaces before a value but kept those after it: "Paris " and " Paris"
    were proposed as two categories, and a schema declaring Paris refused "Paris " (issue 76, consistent
    whitespace). Now both sides, in the proposer's read, the schema's and the chunked one's, names included."""
    from swflow.tables.codec import TableCodec
    from swflow.tables.files import TableRows, read_table
    from swflow.tables.propose import propose

    (tmp_path / "t.csv").write_text("age ,city, flag\n31, Paris, yes\n45, Lyon, no\n28,Paris ,yes\n52,Lyon  ,no\n")
    proposed = {c.name: c for c in propose(read_table(tmp_path / "t.csv"))}
    assert set(proposed) == {"age", "city", "flag"}
    assert list(proposed["city"].categories) == ["Lyon", "Paris"]
    schema = Schema.from_json({"columns": [{"name": "age", "type": "numeric", "min": 0, "max": 99},
                                           {"name": "city", "type": "categorical", "categories": ["Lyon", "Paris"]},
                                           {"name": "flag", "type": "categorical", "categories": ["no", "yes"]}]})
    expected = {"age": [31.0, 45.0, 28.0, 52.0], "city": ["Paris", "Lyon", "Paris", "Lyon"],
                "flag": ["yes", "no", "yes", "no"]}
    frame = schema.check(read_table(tmp_path / "t.csv", schema=schema))
    chunk = next(f for _, f in TableRows(tmp_path / "t.csv", TableCodec(schema)).checked_frames())
    assert {c: frame[c].tolist() for c in schema.names} == expected
    assert {c: chunk[c].tolist() for c in schema.names} == expected


def test_the_associations_map_names_a_hundred_columns_readably_without_overlap():
    """Issue 76: at 100 columns each name on the map's axis is at least 5 pt (it was 3 pt) and no two names
    overlap, measured on the drawn figure's text extents."""
    from swflow.tables.metrics import decile_edges
    from swflow.tables.report import _associations_figure

    names = [f"a_rather_long_column_name_{j:03d}" for j in range(100)]
    schema = Schema.from_json({"columns": [{"name": n, "type": "categorical", "categories": ["x", "y"]}
                                           for n in names]})
    rng = np.random.default_rng(0)
    frames = [schema.check(pd.DataFrame({n: rng.choice(["x", "y"], 200) for n in names})) for _ in range(2)]
    figure = _associations_figure(schema, *frames, decile_edges(schema, frames[1]))
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    labels = [t for t in figure.axes[0].get_yticklabels() if t.get_text()]
    assert len(labels) == 100 and min(t.get_fontsize() for t in labels) >= 5
    boxes = sorted((t.get_window_extent(renderer) for t in labels), key=lambda b: b.y0)
    assert all(below.y1 <= above.y0 + 0.5 for below, above in zip(boxes, boxes[1:]))
    left = figure.axes[0].get_window_extent(renderer).x0
    assert all(b.x0 >= 0 and b.x1 <= left + 1 for b in boxes)  # inside the figure, left of the map


def test_labels_no_installed_font_can_draw_give_one_warning_not_one_per_character(tmp_path):
    """Issue 76: category names in a script DejaVu Sans lacks are drawn with an installed fallback font where there
    is one; what none can draw gives one warning that says what to install, not a warning per glyph."""
    import warnings

    from matplotlib import font_manager

    from swflow.tables.report import FALLBACK_FONTS, _figure, _label_fonts

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with _label_fonts():
            figure = _figure(4, 3)
            figure.add_subplot().set_xticks([0, 1, 2], ["東京", "大阪", "Zürich"])
            figure.savefig(tmp_path / "labels.png")
    messages = [str(w.message) for w in caught]
    assert not any("missing from font" in m for m in messages)
    installed = {f.name for f in font_manager.fontManager.ttflist}
    cjk = {"Noto Sans CJK JP", "Noto Sans CJK SC", "Source Han Sans", "WenQuanYi Zen Hei", "Arial Unicode MS"}
    if not installed & cjk:
        assert len(messages) == 1 and "4 character(s)" in messages[0] and "install" in messages[0]
    assert (tmp_path / "labels.png").stat().st_size > 0 and "DejaVu Sans" not in FALLBACK_FONTS
