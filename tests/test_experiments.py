"""Every script in experiments/ has a --smoke mode, and the default suite runs it: a figure whose
script no longer runs is not a figure."""
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "experiments").glob("*.py"))
NEEDS_FASHION_MNIST = {"latent_sw_fashion.py", "table1.py", "conditional_accuracy.py"}


def _fashion_mnist_installed() -> bool:
    from swflow.io.data import load_dataset

    try:
        load_dataset("fashion-mnist", part="test")
    except (FileNotFoundError, ValueError):
        return False
    return True


def test_every_script_has_a_smoke_mode():
    missing = [p.name for p in SCRIPTS if '"--smoke"' not in p.read_text()]
    assert not missing, f"scripts without --smoke: {missing}"


# scripts that start processes of their own (mp.spawn pickles functions by module, which a script run
# in-process is not) run as a subprocess; the rest run in this process, without a second torch import
OWN_PROCESS = {"bench_distributed.py", "bench_step.py", "bench_stream.py", "peers.py"}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_script_runs_in_smoke_mode(script, tmp_path, monkeypatch):
    if script.name in NEEDS_FASHION_MNIST and not _fashion_mnist_installed():
        pytest.skip("needs Fashion-MNIST (make fashion-mnist)")
    if script.name in OWN_PROCESS:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
        done = subprocess.run([sys.executable, str(script), "--smoke"], cwd=tmp_path, env=env, capture_output=True,
                              text=True)  # no time limit: a loaded machine is slow, not wrong
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
        return
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [str(script), "--smoke"])
    monkeypatch.syspath_prepend(str(script.parent))  # the scripts import their neighbours (bench_step, ...)
    torch_threads = torch.get_num_threads()
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as stop:
        assert stop.code in (0, None), f"{script.name} --smoke exited with {stop.code}"
    finally:
        torch.set_num_threads(torch_threads)


def test_benchmark_tables_are_declared(monkeypatch):
    """Every table the many-table benchmark runs has a schema that loads, a target among its columns, and (a first
    schema, not a variant) a line in the export of the public tables: a table added to one list and not the others
    would fail only after hours of peers."""
    from swflow.tables import Schema

    monkeypatch.syspath_prepend(str(ROOT / "experiments"))
    monkeypatch.syspath_prepend(str(ROOT / "experiments" / "tables"))
    bench = pytest.importorskip("tables_bench")
    exported = (ROOT / "experiments" / "tables" / "export_rdatasets.py").read_text()
    for table in [*bench.TUNE, *bench.REPORT, *bench.FRESH, *bench.HELD_BACK, *bench.RARE, *bench.VARIANTS]:
        schema = Schema.read(ROOT / "experiments" / "tables" / "bench" / f"{table}.json")
        assert bench.TARGETS[table] in schema.names, table
        if table not in bench.VARIANTS:
            assert f'"{table}": (' in exported, table
