"""A table run into a folder: `swflow generate --table` writes privacy.json, model.pt and the samples, in one
process or under torchrun (rank 0 owns the folder)."""
from __future__ import annotations

from pathlib import Path

from .tables import MODEL, TableSynthesizer

__all__ = ["generate_table"]


def generate_table(syn: "TableSynthesizer", table, request, *, n_samples: int | None, seed: int,
                   engine: str | None = None):
    """A table run into the folder ``request.out`` (a RunRequest): privacy.json, model.pt and samples.csv or
    .parquet (as the input; ``n_samples`` records, default as many as the private table), the rows counted by
    ``engine`` (TableSynthesizer.fit). Under torchrun every rank calls this; rank 0 owns the folder and returns the
    report, the others return None."""
    import os

    from ..io.outdir import staged
    from ..privacy import write_report
    from ..tables.files import reading_shown
    from ..tables.rules import RulesUnkept
    from .run_samples import samples_record, with_samples
    from .table_samples import write_samples

    suffix = ".parquet" if str(table).lower().endswith(".parquet") else ".csv"
    unkept = []

    def write(out: Path) -> None:
        """The release (privacy.json, model.pt), then the samples; where the rules cannot be kept, the release alone:
        the budget is spent, and the owner draws records from it once the rules are mended."""
        report, samples = syn.privacy_report(), out / f"samples{suffix}"
        n = n_samples or syn.estimated_rows()  # under a unit the rows' number is private: the release's estimate
        syn.save(out / MODEL)
        try:
            write_samples(syn, out / f"drawing{suffix}", n, seed=seed, progress=not request.quiet)
        except RulesUnkept as err:
            (out / f"drawing{suffix}").unlink(missing_ok=True)  # a chunk or more drawn before a rule gave out
            write_report(report, out)
            unkept.append(err)
            return
        (out / f"drawing{suffix}").rename(samples)
        write_report(with_samples(report, samples_record(samples, n, seed)), out)

    if int(os.environ.get("WORLD_SIZE", "1")) == 1:
        with staged(request.out, overwrite=request.overwrite, inputs=request.inputs, resumable=False) as out:
            with reading_shown(not request.quiet):  # a big file's passes show their bars
                syn.fit(table, progress=not request.quiet, engine=engine)  # memory flat in the rows' number
            write(out)
        report = syn.privacy_report()
    else:
        report = _generate_table_on_ranks(syn, table, request, write, engine)
    if unkept:
        raise RulesUnkept(f"{unkept[0]}. The release is kept in {request.out}/ (privacy.json, model.pt; no samples): "
                          f"its budget is not spent again. Draw records from it with `swflow sample {request.out} "
                          "--n N --out DIR --ignore-rules`, and keep what your rules allow")
    return report


def _generate_table_on_ranks(syn: "TableSynthesizer", table, request, write, engine):
    import torch.distributed as dist

    from .distributed import open_group

    run_dir, out = open_group("cpu", request, resumable=False)
    try:
        syn.fit(table, progress=not request.quiet and dist.get_rank() == 0,
                sharded=True, engine=engine)
        if run_dir is not None:
            write(out)
        dist.barrier()
    except BaseException:
        if run_dir is not None:
            run_dir.abandon()
        raise
    report = None
    if run_dir is not None:
        run_dir.commit()
        report = syn.privacy_report()
    dist.destroy_process_group()
    return report
