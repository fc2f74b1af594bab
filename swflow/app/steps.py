"""The page's steps that run commands: Preview (public rows only), Release (the one step that spends the budget),
Report (the owner's, against held-out rows), Publish (verify, sign, download). Each starts the `swflow` command it
shows, as a job (swflow/app/jobs.py), and reads back only what that command wrote."""
from __future__ import annotations

import json

from .jobs import Busy
from .pages import _redirect, render

__all__ = ["routes", "release_files"]

#: the owner's report's files the page shows (from RUN.owner/, never inside the run)
_OWNER_FILES = ("marginals.png", "associations.png")


def routes():
    from starlette.routing import Route

    return [Route("/preview", preview_page), Route("/preview/start", start_preview, methods=["POST"]),
            Route("/release", release_page), Route("/release/start", start_release, methods=["POST"]),
            Route("/jobs/{key}/cancel", cancel, methods=["POST"]), Route("/jobs/{key}", job_state),
            Route("/report", report_page), Route("/report/start", start_report, methods=["POST"]),
            Route("/owner/{run}/{name}", owner_file), Route("/publish", publish_page),
            Route("/publish/verify", start_verify, methods=["POST"]),
            Route("/publish/sign", start_sign, methods=["POST"]), Route("/download/{run}.zip", download)]


def _start(request, key: str, title: str, steps: list, back: str):
    try:
        request.app.state.jobs.start(key, title, steps)
    except Busy as err:
        return render(request, "error.html", status=409, error=str(err))
    return _redirect(back)


async def job_state(request):
    from starlette.responses import JSONResponse

    job = request.app.state.jobs.get(request.path_params["key"])
    return JSONResponse(None if job is None else job.to_json())


async def cancel(request):
    """Cancel a job: its command's process ends and, as it writes only when it finishes, leaves nothing."""
    job = request.app.state.jobs.get(request.path_params["key"])
    if job is not None:
        job.cancel()
    back = str((await request.form()).get("back", "/release"))
    return _redirect(back if back.startswith("/") and not back.startswith("//") else "/release")


# -- Preview ----------------------------------------------------------------------------------------------------
async def preview_page(request):
    from .commands import preview_step

    workspace, job = request.app.state.workspace, request.app.state.jobs.get("preview")
    lines = None
    if job is not None and job.state == "done":
        lines = next((json.loads(line) for line in reversed(job.lines) if line.startswith("[")), None)
    ready = "public" in workspace.files and workspace.schema is not None
    return render(request, "preview.html", job=job, lines=lines, step=preview_step(workspace) if ready else None)


async def start_preview(request):
    from .commands import preview_step

    workspace = request.app.state.workspace
    if "public" not in workspace.files or workspace.schema is None:
        raise ValueError("the preview runs on Public rows under the schema: choose them (Data) and save a schema")
    return _start(request, "preview", "Preview", [preview_step(workspace)], "/preview")


# -- Release ----------------------------------------------------------------------------------------------------
async def release_page(request):
    from .commands import release_step

    workspace = request.app.state.workspace
    ready = "private" in workspace.files and workspace.schema is not None
    job = request.app.state.jobs.get(f"run:{workspace.settings.run}")
    return render(request, "release.html", job=job, step=release_step(workspace) if ready else None,
                  finished=(workspace.run_dir() / "privacy.json").is_file())


async def start_release(request):
    """`swflow generate --table …` into FOLDER/runs/NAME: refused while another tab writes the same run, and when
    that run exists (a finished run is never replaced from the page: choose a new name)."""
    from .commands import release_step

    workspace = request.app.state.workspace
    if "private" not in workspace.files or workspace.schema is None:
        raise ValueError("a release needs the Private table (Data) and a saved schema (Schema)")
    form = await request.form()
    if form.get("run"):
        workspace.set_settings(run=str(form["run"]).strip())
    if workspace.run_dir().exists() and not _running(request, workspace.settings.run):
        raise ValueError(f"runs/{workspace.settings.run} exists: name the new release otherwise (a finished run is "
                         "never replaced from this page)")
    return _start(request, f"run:{workspace.settings.run}", "Release", [release_step(workspace)], "/release")


def _running(request, run: str) -> bool:
    job = request.app.state.jobs.get(f"run:{run}")
    return job is not None and job.state == "running"


# -- Report -----------------------------------------------------------------------------------------------------
def _chosen_run(request) -> str | None:
    workspace = request.app.state.workspace
    runs = workspace.runs()
    asked = request.query_params.get("run")
    return asked if asked in runs else (workspace.settings.run if workspace.settings.run in runs else
                                        (runs[0] if runs else None))


async def report_page(request):
    from .commands import report_step

    workspace, run = request.app.state.workspace, _chosen_run(request)
    metrics = None
    if run is not None and (workspace.folder / "runs" / f"{run}.owner" / "metrics.json").is_file():
        metrics = json.loads((workspace.folder / "runs" / f"{run}.owner" / "metrics.json").read_text())
    ready = run is not None and "heldout" in workspace.files
    return render(request, "report.html", run=run, runs=workspace.runs(), metrics=metrics,
                  job=request.app.state.jobs.get(f"report:{run}"), step=report_step(workspace, run) if ready else None,
                  pictures=[n for n in _OWNER_FILES if metrics is not None])


async def start_report(request):
    from .commands import report_step

    form, workspace = await request.form(), request.app.state.workspace
    run = str(form.get("run", ""))
    if run not in workspace.runs() or "heldout" not in workspace.files:
        raise ValueError("the owner's report compares a finished run with Held-out rows: choose both")
    return _start(request, f"report:{run}", "Owner's report", [report_step(workspace, run)], f"/report?run={run}")


async def owner_file(request):
    from starlette.responses import FileResponse

    workspace, run, name = request.app.state.workspace, request.path_params["run"], request.path_params["name"]
    if run not in workspace.runs() or name not in _OWNER_FILES:
        raise ValueError("no such picture")
    path = workspace.inside(workspace.folder / "runs" / f"{run}.owner" / name)
    return FileResponse(path, media_type="image/png", headers={"cache-control": "no-store"})


# -- Publish ----------------------------------------------------------------------------------------------------
async def publish_page(request):
    from .commands import sign_steps, verify_step

    workspace, run = request.app.state.workspace, _chosen_run(request)
    jobs = request.app.state.jobs
    context = dict(run=run, runs=workspace.runs(), verify_job=jobs.get(f"verify:{run}"),
                   sign_job=_titled(jobs.get(f"run:{run}"), "Sign"), key=workspace.key_path)
    if run is not None:
        context.update(verify=verify_step(workspace, run), sign=sign_steps(workspace, run),
                       signed=(workspace.run_dir(run) / "signature.json").is_file(), files=release_files(workspace,
                                                                                                        run))
    return render(request, "publish.html", **context)


def _titled(job, title: str):
    """``job`` where it is ``title``'s (a run folder's one writer is its release, then its signature)."""
    return job if job is not None and job.title == title else None


async def start_verify(request):
    from .commands import verify_step

    run = await _form_run(request)
    return _start(request, f"verify:{run}", "Verify", [verify_step(request.app.state.workspace, run)],
                  f"/publish?run={run}")


async def start_sign(request):
    from .commands import sign_steps

    run = await _form_run(request)
    return _start(request, f"run:{run}", "Sign", sign_steps(request.app.state.workspace, run), f"/publish?run={run}")


async def _form_run(request) -> str:
    run = str((await request.form()).get("run", ""))
    if run not in request.app.state.workspace.runs():
        raise ValueError("choose a finished run")
    return run


def release_files(workspace, run: str) -> list:
    """The files a release's zip holds: every regular file of the run folder (the samples, privacy.json,
    model.pt, the signature), never the owner's report (RUN.owner/ lies beside the run, not in it); a link or any
    other special file is refused."""
    run_dir = workspace.run_dir(run)
    files = []
    for path in sorted(run_dir.rglob("*")):
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            raise ValueError(f"runs/{run} holds {path.name}, which is not a plain file: the release is not zipped")
        if path.is_file():
            files.append(path)
    return files


async def download(request):
    """The release as a zip (Download release): its files under the run's name, read from inside the folder."""
    import io
    import zipfile

    from starlette.responses import Response

    workspace, run = request.app.state.workspace, request.path_params["run"]
    if run not in workspace.runs():
        raise ValueError("no finished run of that name")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in release_files(workspace, run):
            archive.write(workspace.inside(path), f"{run}/{path.relative_to(workspace.run_dir(run))}")
    return Response(buffer.getvalue(), media_type="application/zip",
                    headers={"content-disposition": f'attachment; filename="{run}.zip"'})
