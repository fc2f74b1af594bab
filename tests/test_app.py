"""The owner's page's safety over HTTP (issue 93): `swflow app` as started by an owner, asked as a browser or another
program would ask it. Every request without the token, from another host or origin, for a path outside the owner's
folders, over the upload limit, or a second writer of one run, is refused; no private value reaches a page, a
message or the server's output."""
import json
import time

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from app_server import App, example_files  # noqa: E402

SECRET = "QQ-secret-sector-zz"


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    root = tmp_path_factory.mktemp("app")
    files = example_files(root / "owner")
    frame = __import__("pandas").read_csv(files["private"])
    frame.loc[frame.index[::97], "sector"] = SECRET  # a value no schema declares: refused by column and rule only
    frame.to_csv(files["private"], index=False)
    outside = root / "elsewhere"
    outside.mkdir()
    (outside / "other.csv").write_text("a,b\n1,2\n")
    running = App(root / "workspace", "--max-upload-mb", "1")
    running.files, running.outside = files, outside
    yield running
    running.close()


def _multipart(role: str, name: str, data: bytes) -> tuple[bytes, str]:
    boundary = "swflowtestboundary"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"role\"\r\n\r\n{role}\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
            f"Content-Type: text/csv\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def test_a_request_without_the_token_is_refused(app):
    assert app.request("GET", "/data", token=False)[0] == 403
    assert app.request("GET", "/data", token=False, headers={"Cookie": "swflow_token=guess"})[0] == 403
    assert app.request("GET", "/static/app.js", token=False)[0] == 403
    status, _ = app.request("GET", f"/data?token={app.token}", token=False)
    assert status == 303  # traded for a cookie, the URL without it
    assert app.request("GET", "/data")[0] == 200


def test_another_host_or_origin_is_refused(app):
    assert app.request("GET", "/data", headers={"Host": "evil.example:80"})[0] == 403
    status, _ = app.form("/privacy/save", {"epsilon": "5", "delta": "1e-9"},
                         headers={"Origin": "http://evil.example"})
    assert status == 403


def test_a_path_outside_the_chosen_folders_is_refused(app, tmp_path):
    for path in (app.outside / "other.csv", "../elsewhere/other.csv", "/etc/passwd"):
        status, body = app.form("/data/path", {"role": "public", "path": str(path)})
        assert status == 403 and b"outside the folders" in body, path
    link = app.folder / "link.csv"  # a link inside the folder that leads out of it
    link.symlink_to(app.outside / "other.csv")
    status, _ = app.form("/data/path", {"role": "public", "path": "link.csv"})
    assert status == 403
    for path in ("/owner/../../etc/passwd", "/download/..%2F..%2Fetc.zip", "/owner/release-1/metrics.json"):
        assert app.request("GET", path)[0] in (400, 404), path


def test_an_upload_over_the_limit_is_refused_before_it_is_read(app):
    body, kind = _multipart("public", "big.csv", b"x" * (2 * 2 ** 20))
    status, words = app.request("POST", "/data/upload", body=body, headers={"Content-Type": kind})
    assert status == 413 and b"upload limit of 1 MB" in words
    assert not (app.folder / "uploads" / "public.csv").exists()


def test_private_problems_name_columns_and_rules_never_a_value_and_one_writer_a_run(app):
    """The private rows' problems with the proposed schema, by column and rule; then two tabs start the same
    release: the second is refused while the first runs, and a finished run is never replaced from the page."""
    for role in ("private", "public", "heldout"):
        body, kind = _multipart(role, f"{role}.csv", app.files[role].read_bytes())
        assert app.request("POST", "/data/upload", body=body, headers={"Content-Type": kind})[0] == 303
    assert app.form("/schema/propose", {})[0] == 303
    status, page = app.request("GET", "/schema")
    assert status == 200 and b"column &#39;sector&#39;: some rows hold values outside its declared categories" in page
    assert SECRET.encode() not in page and SECRET.encode() not in app.request("GET", "/privacy")[1]

    schema = json.loads((app.folder / "schema.json").read_text())
    for column in schema["columns"]:
        if column["name"] == "sector":
            column["categories"].append(SECRET)
        if column["name"] == "hours":
            column["max"] = 100
    body, kind = _multipart("x", "schema.json", json.dumps(schema).encode())
    assert app.request("POST", "/schema/load", body=body, headers={"Content-Type": kind})[0] == 303
    assert app.form("/privacy/save", {"epsilon": "1", "delta": "1e-9", "adjacency": "add-remove"})[0] == 303
    first = app.form("/release/start", {"run": "twice"})
    second = app.form("/release/start", {"run": "twice"})
    assert first[0] == 303 and second[0] == 409 and b"already running" in second[1]
    state = _finished(app, "run:twice")
    assert state["state"] == "done", state
    assert "--adjacency add-remove" in state["commands"][0]
    assert json.loads((app.folder / "runs" / "twice" / "privacy.json").read_text())["adjacency"] == "add-remove"
    third = app.form("/release/start", {"run": "twice"})
    assert third[0] == 400 and b"never replaced" in third[1]
    assert SECRET.encode() not in app.request("GET", "/release")[1]

    app.process.kill()  # a killed page: the finished release, the files and the schema are there when it starts again
    again = App(app.folder)
    try:
        status, page = again.request("GET", "/publish")
        assert status == 200 and b"<option selected>twice</option>" in page and b"/download/twice.zip" in page
        assert (app.folder / "runs" / "twice" / "privacy.json").is_file()
        assert b"chosen:" in again.request("GET", "/data")[1]
        assert b"Every private row fits the schema." in again.request("GET", "/schema")[1]
    finally:
        again.close()


def _finished(app, key: str) -> dict:
    """The job's state once it has ended (polled twice a second; the bound only stops a hang)."""
    for _ in range(2400):
        state = json.loads(app.request("GET", f"/jobs/{key}")[1])
        if state["state"] != "running":
            return state
        time.sleep(0.5)
    raise AssertionError(f"{key} still running after 20 minutes")


def test_the_server_prints_its_url_and_what_it_may_touch(tmp_path):
    app = App(tmp_path / "workspace", "--read", str(tmp_path))
    try:
        assert app.url.startswith("http://127.0.0.1:") and len(app.token) >= 40
        assert app.request("GET", "/data")[0] == 200
    finally:
        printed = app.close()
    assert "reads and writes that folder only" in printed and "Traceback" not in printed
