"""What a new user does with the wheel, from a folder outside the checkout (make wheel-check runs it with the
wheel's own venv, installed with the [eval] extra). Each check prints one line; any failure exits non-zero.

    python .ci/wheel_check.py
"""
from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

BIN = Path(sys.executable).parent
SWFLOW = str(BIN / "swflow")


def run(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"FAILED: {' '.join(argv)}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return done.stdout


def check(what: str, ok: bool) -> None:
    print(f"{'ok' if ok else 'FAILED'}: {what}")
    if not ok:
        sys.exit(1)


def main() -> None:
    here = Path.cwd()
    if (here / "swflow").is_dir():
        sys.exit("run this from a folder outside the checkout")
    version = run(SWFLOW, "--version").strip()
    check(f"swflow --version ({version})", version.startswith("swflow "))
    run(SWFLOW, "--help")
    probe = run(sys.executable, "-c", "import sys; from swflow.cli import build_parser; build_parser().format_help(); "
                                      "print('torch' in sys.modules)")
    check("swflow --help loads no torch", probe.strip() == "False")
    where = run(sys.executable, "-c", "import autoencoders, swflow; print(autoencoders.__file__); print(swflow.__file__)")
    site = sysconfig.get_paths()["purelib"]
    check("the wheel ships both packages, swflow and autoencoders", all(
        line.startswith(site) for line in where.split()))

    run(SWFLOW, "demo", "--out", "demo-run")
    run(SWFLOW, "evaluate", "demo-run", "--n-fid", "100", "--quiet")
    metrics = json.loads((here / "demo-run" / "metrics.json").read_text())
    check(f"demo, then evaluate with FID from the wheel (FID@100 {metrics.get('fid', float('nan')):.1f}, copy rate "
          f"{metrics.get('owner_only', {}).get('copy_rate', float('nan')):.2f}, owner only)",
          "fid" in metrics and "copy_rate" in metrics.get("owner_only", {}))

    code = ("import numpy as np\n"
            "from swflow import Synthesizer\n"
            "from swflow.io.data import example_images\n"
            "images, _ = example_images()\n"
            "syn = Synthesizer('dpswflow-hist', epsilon=1.0, delta=1e-5, autoencoder='digits-adv').fit(images)\n"
            "x = syn.sample(100, seed=1, progress=False)\n"
            "print(x.shape, float(x.min()) >= 0.0, float(x.max()) <= 1.0, syn.privacy_report().epsilon <= 1.0)\n")
    out = run(sys.executable, "-c", code).strip()
    check(f"a Synthesizer with autoencoder='digits-adv' fits the digits and samples images ({out})",
          out == "(100, 1, 8, 8) True True True")

    from PIL import Image
    import numpy as np

    public = here / "public"
    public.mkdir()
    rng = np.random.default_rng(0)
    for i in range(40):
        Image.fromarray((rng.random((16, 16)) * 255).astype(np.uint8)).save(public / f"{i}.png")
    site = Path(sysconfig.get_paths()["purelib"])
    before = {p for p in site.rglob("*") if p.is_file()}
    run(SWFLOW, "train-ae", "--images", str(public), "--name", "tiny", "--size", "8", "--epochs", "1",
        "--decoder-steps", "0")
    after = {p for p in site.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    check("train-ae without --out-dir writes into the current folder and nothing into site-packages",
          (here / "tiny.pt").exists() and not (after - before))


if __name__ == "__main__":
    main()
