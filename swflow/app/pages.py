"""The page's first three steps, which spend nothing: Data (the files), Schema (proposed, edited, checked against the
private rows), Privacy (ε, δ, the unit, the target, the rules). Each handler is a thin layer over the library."""
from __future__ import annotations

import json
import math

from .workspace import ROLES, OutsideFolders

__all__ = ["routes", "render", "failed", "STEPS"]

#: the page's steps, in order: (path, title)
STEPS = (("/data", "Data"), ("/schema", "Schema"), ("/privacy", "Privacy"), ("/preview", "Preview"),
         ("/release", "Release"), ("/report", "Report"), ("/publish", "Publish"))
_TYPES = ("numeric", "categorical", "date", "datetime", "ignore")


def routes():
    from starlette.routing import Route

    return [Route("/", lambda request: _redirect("/data")), Route("/data", data_page),
            Route("/data/upload", upload, methods=["POST"]), Route("/data/path", choose_path, methods=["POST"]),
            Route("/schema", schema_page), Route("/schema/propose", propose, methods=["POST"]),
            Route("/schema/save", save_schema, methods=["POST"]), Route("/schema/load", load_schema, methods=["POST"]),
            Route("/schema.json", download_schema), Route("/privacy", privacy_page),
            Route("/privacy/save", save_privacy, methods=["POST"])]


def render(request, template: str, *, status: int = 200, **context):
    workspace = request.app.state.workspace
    return request.app.state.templates.TemplateResponse(
        request, template, {"steps": STEPS, "here": request.url.path, "workspace": workspace,
                            "settings": workspace.settings, "roles": ROLES, **context}, status_code=status)


def _redirect(path: str):
    from starlette.responses import RedirectResponse

    return RedirectResponse(path, status_code=303)


async def failed(request, error: Exception):
    """An error a step raised, said on the page in the library's words (which name columns and rules, never a
    value); a path outside the folders is 403."""
    status = 403 if isinstance(error, OutsideFolders) else 400 if isinstance(error, (ValueError, KeyError)) else 500
    words = str(error) if status != 500 else f"{type(error).__name__} (see the terminal running `swflow app`)"
    return render(request, "error.html", status=status, error=words)


# -- Data -------------------------------------------------------------------------------------------------------
async def data_page(request):
    return render(request, "data.html")


async def upload(request):
    """A file sent through the page, saved under its role's name in FOLDER/uploads (the Guard has checked its
    length against the limit; the copy is counted again as it is written)."""
    workspace = request.app.state.workspace
    form = await request.form(max_files=1, max_fields=4)
    role, sent = form.get("role"), form.get("file")
    if sent is None or not getattr(sent, "filename", None):
        raise ValueError(f"choose a file for {ROLES.get(role, 'the upload')}")
    path = workspace.upload_path(role, sent.filename)
    written = 0
    with open(path, "wb") as out:
        while chunk := await sent.read(2 ** 20):
            written += len(chunk)
            if written > workspace.max_upload:
                out.close()
                path.unlink()
                raise ValueError(f"the file is larger than the upload limit of {workspace.max_upload // 2 ** 20} MB")
            out.write(chunk)
    workspace.choose(role, path)
    return _redirect("/data")


async def choose_path(request):
    form = await request.form()
    request.app.state.workspace.choose(form.get("role"), str(form.get("path", "")).strip())
    return _redirect("/data")


# -- Schema -----------------------------------------------------------------------------------------------------
async def schema_page(request):
    workspace = request.app.state.workspace
    problems = _problems(workspace) if workspace.schema is not None else None
    return render(request, "schema.html", columns=_rows(workspace.schema), problems=problems, types=_TYPES,
                  step=_schema_step(workspace))


def _schema_step(workspace):
    from .commands import schema_step

    return schema_step(workspace) if "public" in workspace.files else None


async def propose(request):
    """The schema proposed from the public rows (`swflow schema PUBLIC`); without them the owner loads one."""
    from ..tables import Schema
    from ..tables.files import read_table

    workspace = request.app.state.workspace
    if "public" not in workspace.files:
        raise ValueError("Propose schema reads Public rows: choose them in Data first, or load a schema.json")
    workspace.save_schema(Schema.propose(read_table(workspace.files["public"])).to_json())
    return _redirect("/schema")


async def save_schema(request):
    form = await request.form()
    workspace = request.app.state.workspace
    workspace.save_schema(_edited(workspace.schema, form))
    return _redirect("/schema")


async def load_schema(request):
    form = await request.form(max_files=1)
    sent = form.get("file")
    if sent is None or not getattr(sent, "filename", None):
        raise ValueError("choose a schema.json to load")
    try:
        schema = json.loads((await sent.read()).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"that file is not a schema's JSON ({err})") from None
    request.app.state.workspace.save_schema(schema)
    return _redirect("/schema")


async def download_schema(request):
    from starlette.responses import FileResponse

    workspace = request.app.state.workspace
    if workspace.schema is None:
        raise ValueError("no schema yet: propose or load one")
    return FileResponse(workspace.schema_path, filename="schema.json", media_type="application/json")


def _rows(schema_json) -> list[dict]:
    """One dict a column for the editable table: its JSON entry and the texts of its inputs."""
    rows = []
    for entry in (schema_json or {}).get("columns", []):
        categories = entry.get("categories")
        rows.append({"name": entry["name"], "type": entry.get("type"), "min": _plain(entry.get("min", "")),
                     "max": _plain(entry.get("max", "")),
                     "categories": "" if categories is None else json.dumps(categories),
                     "integer": entry.get("integer", False), "missing": entry.get("missing", False),
                     "log": entry.get("scale") == "log", "note": entry.get("note", "")})
    return rows


def _plain(bound):
    """A bound as an owner writes it: 10, not 10.0."""
    return int(bound) if isinstance(bound, float) and bound.is_integer() else bound


def _edited(schema_json, form) -> dict:
    """The schema's JSON with the table's edits applied, column by column (keys a type has not are dropped)."""
    if schema_json is None:
        raise ValueError("propose or load a schema first")
    columns = []
    for i, entry in enumerate(schema_json["columns"]):
        kind = form.get(f"type-{i}", entry.get("type"))
        if kind not in _TYPES:
            raise ValueError(f"column {entry['name']!r}: type is one of {list(_TYPES)}")
        new = {"name": entry["name"], "type": kind, **({"note": entry["note"]} if entry.get("note") else {})}
        if kind == "categorical":
            try:
                new["categories"] = json.loads(form.get(f"categories-{i}") or "null")
            except json.JSONDecodeError:
                raise ValueError(f"column {entry['name']!r}: categories are a JSON list, such as "
                                 '["a", "b", null] (null: a missing value)') from None
            new.update({"dtype": entry["dtype"]} if entry.get("dtype") else {})
        elif kind != "ignore":
            new.update(_bounds(entry, kind, form, i))
        columns.append(new)
    return {"columns": columns, **({"rules": schema_json["rules"]} if schema_json.get("rules") else {})}


def _bounds(entry: dict, kind: str, form, i: int) -> dict:
    low, high = form.get(f"min-{i}", ""), form.get(f"max-{i}", "")
    if kind == "numeric":
        try:
            low, high = float(low), float(high)
        except ValueError:
            raise ValueError(f"column {entry['name']!r}: min and max are numbers") from None
        low, high = (int(v) if v.is_integer() and abs(v) < 2 ** 53 else v for v in (low, high))
    out = {"min": low, "max": high, **({"missing": True} if form.get(f"missing-{i}") else {})}
    if kind == "numeric":
        out.update({"integer": True} if form.get(f"integer-{i}") else {})
        out.update({"scale": "log"} if form.get(f"log-{i}") else {})
        if entry.get("decimals") is not None and not form.get(f"integer-{i}"):
            out["decimals"] = entry["decimals"]
    elif kind == "datetime" and entry.get("unit"):
        out["unit"] = entry["unit"]
    return out


def _problems(workspace) -> list[str] | None:
    """Every problem the private rows have with the schema, in the library's words (a column and a rule, never a
    value, a count or a row); None without a private table."""
    from ..tables import Schema
    from ..tables.files import read_table

    if "private" not in workspace.files:
        return None
    schema = Schema.from_json(workspace.schema)
    frame = read_table(workspace.files["private"], schema=schema)
    unit = workspace.settings.privacy_unit
    return schema.problems(frame.drop(columns=[unit]) if unit in frame.columns else frame)


# -- Privacy ----------------------------------------------------------------------------------------------------
async def privacy_page(request):
    workspace = request.app.state.workspace
    return render(request, "privacy.html", headers=_private_header(workspace), odds=_odds(workspace.settings.epsilon),
                  schema_columns=[c["name"] for c in (workspace.schema or {}).get("columns", [])
                                  if c.get("type") != "ignore"],
                  rules="\n".join((workspace.schema or {}).get("rules", [])))


def _odds(epsilon: float) -> str:
    return f"{math.exp(epsilon):.3g}" if epsilon < 50 else "a vast number"


def _private_header(workspace) -> list[str]:
    """The private table's column names (the unit is one of them): its header only, no row (a .csv or .parquet
    file: Workspace.choose takes no other)."""
    if "private" not in workspace.files:
        return []
    path = workspace.files["private"]
    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names)
    import pandas as pd

    return list(pd.read_csv(path, nrows=0).columns)


async def save_privacy(request):
    form = await request.form()
    workspace = request.app.state.workspace
    try:
        epsilon, delta = float(form.get("epsilon", "")), float(form.get("delta", ""))
        rows = int(form["max_rows_per_unit"]) if form.get("max_rows_per_unit") else None
    except ValueError:
        raise ValueError("Epsilon (ε), Delta (δ) and Rows per unit are numbers") from None
    workspace.set_settings(epsilon=epsilon, delta=delta, privacy_unit=form.get("privacy_unit") or None,
                           max_rows_per_unit=rows, target=form.get("target") or None,
                           adjacency=form.get("adjacency") or "replace-one")
    rules = [line.strip() for line in str(form.get("rules", "")).splitlines() if line.strip()]
    if workspace.schema is not None and rules != workspace.schema.get("rules", []):
        workspace.save_schema({**{k: v for k, v in workspace.schema.items() if k != "rules"},
                               **({"rules": rules} if rules else {})})
    return _redirect("/privacy")
