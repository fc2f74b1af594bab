"""The owner's page as a person uses it (issue 93): Playwright drives Debian's chromium through the guide's example,
by the controls' labels, from upload to a downloaded, verified, signed release, with a screenshot of every step.

Skipped where chromium or Playwright is absent, except under CI (CI=true), where `.ci/run` installs both and a skip
would hide a page that was never opened. SWFLOW_APP_SCREENSHOTS=FOLDER keeps the screenshots there (docs/app/ is
made so: docs/app.md)."""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from app_server import App, example_files

CHROMIUM = Path("/usr/bin/chromium")
#: a step's own work (a release, a report) ends well within this on 2 cores; only a hang reaches it
JOB_WAIT_MS = 600_000


def _browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    missing = [what for what, ok in (("Playwright (pip install playwright)", sync_playwright is not None),
                                     ("Debian's chromium (make browser)", CHROMIUM.exists())) if not ok]
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI runs the page in a real browser: {' and '.join(missing)} missing")
        pytest.skip(f"{' and '.join(missing)} not installed")
    return sync_playwright


@pytest.fixture
def page(tmp_path):
    sync_playwright = _browser()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"])
        context = browser.new_context(accept_downloads=True, viewport={"width": 1280, "height": 900})
        yield context.new_page()
        context.close()
        browser.close()


def _shots(tmp_path) -> Path:
    folder = Path(os.environ.get("SWFLOW_APP_SCREENSHOTS") or tmp_path / "shots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _wait_for_job(page, title: str):
    """Wait until the job's section shows it ended; it must have ended done."""
    from playwright.sync_api import expect

    section = page.locator("section.job").filter(has=page.get_by_role("heading", name=re.compile(f"^{title}:")))
    expect(section).not_to_have_attribute("data-state", "running", timeout=JOB_WAIT_MS)
    assert section.get_attribute("data-state") == "done", section.inner_text()


def test_the_guides_example_from_upload_to_a_signed_download_by_clicks_alone(page, tmp_path):
    from playwright.sync_api import expect

    files, shots = example_files(tmp_path / "owner-files"), _shots(tmp_path)
    app = App(tmp_path / "workspace")
    try:
        page.goto(app.url)
        expect(page).to_have_title("swflow · Data")
        assert "token" not in page.url  # traded for a cookie on the first visit
        for role, label in (("private", "Private table"), ("public", "Public rows"), ("heldout", "Held-out rows")):
            page.get_by_label(label, exact=True).set_input_files(str(files[role]))
            page.get_by_role("button", name=f"Upload {label.lower()}").click()
            expect(page.locator("fieldset").filter(has_text=label).locator(".chosen")).to_be_visible()
        page.screenshot(path=shots / "1-data.png", full_page=True)

        page.get_by_role("link", name="2. Schema").click()
        page.get_by_role("button", name="Propose schema").click()
        problems = page.locator(".problems li")
        expect(problems).to_have_count(1)  # the public rows' hours end below the private ones'
        expect(problems.first).to_contain_text("column 'hours': some rows lie outside")
        page.screenshot(path=shots / "2-schema-problem.png", full_page=True)
        page.get_by_label("Max of hours").fill("100")
        page.get_by_label("Min of age").fill("18")
        page.get_by_role("button", name="Save schema").click()
        expect(page.get_by_text("Every private row fits the schema.")).to_be_visible()
        page.screenshot(path=shots / "2-schema.png", full_page=True)

        page.get_by_role("link", name="3. Privacy").click()
        page.get_by_label("Epsilon (ε)").fill("1")
        page.get_by_label("Delta (δ)").fill("1e-9")
        page.get_by_label("Target").select_option("income")
        page.get_by_role("button", name="Save privacy settings").click()
        expect(page.get_by_text("odds at most 2.72 times")).to_be_visible()
        page.screenshot(path=shots / "3-privacy.png", full_page=True)

        page.get_by_role("link", name="4. Preview").click()
        page.get_by_role("button", name="Run the preview").click()
        _wait_for_job(page, "Preview")
        expect(page.locator("table.preview tbody tr")).to_have_count(5)  # floor, independent, three ε
        page.screenshot(path=shots / "4-preview.png", full_page=True)

        page.get_by_role("link", name="5. Release").click()
        command = page.locator("pre.command").inner_text()
        page.get_by_role("button", name="Release", exact=True).click()
        _wait_for_job(page, "Release")
        expect(page.get_by_text("runs/release-1 is finished.")).to_be_visible()
        page.screenshot(path=shots / "5-release.png", full_page=True)
        page.screenshot(path=shots / "overview.png")  # the README's first screen: one window's worth

        page.get_by_role("link", name="6. Report").click()
        page.get_by_role("button", name="Make the owner's report").click()
        _wait_for_job(page, "Owner's report")
        expect(page.locator("table.metrics")).to_contain_text("Classifier's AUC on income")
        expect(page.locator("table.metrics")).to_contain_text("pair tables: discrete-gaussian noise of std")  # issue 95
        expect(page.get_by_text("For the owner only.")).to_be_visible()
        page.screenshot(path=shots / "6-report.png", full_page=True)

        page.get_by_role("link", name="7. Publish").click()
        page.get_by_role("button", name="Verify").click()
        _wait_for_job(page, "Verify")
        page.get_by_role("button", name="Sign").click()
        _wait_for_job(page, "Sign")
        expect(page.get_by_text("runs/release-1 is signed.")).to_be_visible()
        with page.expect_download() as download:
            page.get_by_role("link", name="Download release").click()
        zipped = tmp_path / "release.zip"
        download.value.save_as(zipped)
        page.screenshot(path=shots / "7-publish.png", full_page=True)
        for step in ("/data", "/schema", "/privacy", "/preview", "/release", "/report", "/publish"):
            page.goto(app.url.split("/?")[0] + step)
            _keyboard_reaches_every_control(page)
    finally:
        app.close()
    _the_download_verifies_and_the_command_reproduces_the_claim(tmp_path, zipped, command, app.folder)


def _keyboard_reaches_every_control(page) -> None:
    """Tab alone visits every link, button, input and select of the page."""
    selector = ("a[href], button:not([disabled]), input:not([type=hidden]):not([disabled]), select:not([disabled]), "
                "textarea:not([disabled])")
    controls = page.evaluate("(selector) => Array.from(document.querySelectorAll(selector))"
                             ".map((e, i) => { e.dataset.probe = i; return i; })", selector)
    reached = set()
    page.locator("body").focus()
    for _ in range(len(controls) + 20):
        page.keyboard.press("Tab")
        probe = page.evaluate("() => document.activeElement && document.activeElement.dataset.probe")
        if probe is not None:
            reached.add(int(probe))
    assert reached == set(controls), f"controls Tab never reaches: {sorted(set(controls) - reached)}"


def _the_download_verifies_and_the_command_reproduces_the_claim(tmp_path, zipped, command, workspace):
    with zipfile.ZipFile(zipped) as archive:
        names = archive.namelist()
        archive.extractall(tmp_path / "downloaded")
    assert {"release-1/privacy.json", "release-1/model.pt", "release-1/samples.csv",
            "release-1/signature.json"} <= set(names)
    assert not any(".owner" in n or "metrics.json" in n or "private" in n for n in names)
    key = workspace / "keys" / "owner.pem.pub"
    checked = subprocess.run([sys.executable, "-m", "swflow.cli", "verify", str(tmp_path / "downloaded" / "release-1"),
                              "--public-key", str(key), "--quiet"], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    assert "signature:" in checked.stdout
    # the page's command line, run as it shows it (into another folder): the same claim
    args = shlex.split(command)[1:]
    args[args.index("--out") + 1] = str(tmp_path / "by-hand")
    rerun = subprocess.run([sys.executable, "-m", "swflow.cli", *args, "--quiet"], capture_output=True, text=True,
                           cwd=workspace)
    assert rerun.returncode == 0, rerun.stderr
    page_claim = json.loads((workspace / "runs" / "release-1" / "privacy.json").read_text())
    hand_claim = json.loads((tmp_path / "by-hand" / "privacy.json").read_text())
    for field in ("epsilon", "delta", "adjacency", "accountant", "noise_multiplier", "statement"):
        assert page_claim[field] == hand_claim[field], field
    shutil.rmtree(tmp_path / "by-hand")
