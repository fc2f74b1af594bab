"""A table run's n under add-remove adjacency: released once, first, and read back (swflow/privacy/size.py).

The part of :class:`~swflow.pipeline.tables.TableSynthesizer` that, under add-remove, releases the count of the
records before anything else and hands the later steps its estimate; and, on load, finds that release in the
ledger and checks that the report's n is the one it gives. Under replace-one n is public and nothing here runs.
"""
from __future__ import annotations

__all__ = ["TableSize", "SIZE_NOTE"]

SIZE_NOTE = ("add-remove adjacency: n is private. The run released the count of its records once, first, with "
             "noise of std {sigma:.4g} (a {share:g} share of the budget); dataset_size is that count rounded, and "
             "every later step (cells, pairs, calibration, the particles' normalisation, the default number of "
             "samples) read it, never n")


class TableSize:
    """Mixed into TableSynthesizer: ``self._size`` (the released count, or None under replace-one)."""

    def _public_size(self, n: float, noise, *, sharded: bool) -> tuple[int, tuple]:
        """(the n every later step may read, the events already spent): n itself under replace-one; under
        add-remove its released estimate, and that release's event (``n``: the rows' weights' sum under a privacy
        unit, which adds at most its bound to it)."""
        from ..privacy import PrivacyLedger, ReleasePlan
        from ..privacy.size import public_size, release_size
        from ..privacy.targets import check_histogram

        self._size = None
        if self.privacy.adjacency != "add-remove" or not self.privacy.private:
            return n, ()
        if sharded:
            raise ValueError("add-remove adjacency is not built for torchrun: run the table in one process, or "
                             "use replace-one")
        check_histogram(self.privacy, ReleasePlan(releases=1, dataset_size=1, sample_size=None, n_projections=1,
                                                  dim=1, noise=self.privacy.count_noise, size_private=True),
                        seed_typed=self.privacy_seed is not None)  # the settings' checks, before anything is drawn
        self._size, event = release_size(n, self.privacy, noise, PrivacyLedger(), contribution=self._contribution)
        return public_size(self._size), (event,)

    def _compose_size(self, spent: tuple) -> None:
        """Add the size release to the report's ledger (the accountant composes it with the others)."""
        from ..privacy import compose
        from ..privacy.size import SIZE_SHARE

        if spent:
            self._report = compose(self._report, spent, target_epsilon=self.privacy.epsilon,
                                   note="the count of the records (add-remove: n private)").with_notes(
                private_size=SIZE_NOTE.format(sigma=spent[0].noise_std, share=SIZE_SHARE))

    def _restore_size(self, size: float | None, report, source: str):
        """(n̂, its σ) from a saved add-remove run, checked: its ledger's count of records is one count with a
        unit's sensitivity, and the report's n is n̂ rounded. None under replace-one."""
        from ..privacy.histogram import histogram_sensitivity
        from ..privacy.size import public_size
        from ..privacy.verify import ClaimMismatch
        from .table_measurements import RECORD_COUNT, released

        self._size = size  # model.pt's released count of records (table_measurements.read_numbers)
        if report.adjacency != "add-remove" or not report.private:
            if self._size is not None:
                raise ClaimMismatch(f"{source}: a released count of records under {report.adjacency}; fit again")
            return None
        event = released(report, RECORD_COUNT, source)
        if self._size is None or event["n_projections"] != 1 or event.get("contribution", 1) != self._contribution or \
                event["sensitivity"] != histogram_sensitivity(1, adjacency="add-remove",
                                                              contribution=self._contribution).value or \
                report.dataset_size != public_size(self._size):
            raise ClaimMismatch(f"{source}: an add-remove run carries its released count of records in its ledger, "
                                "and its n is that count: the file was edited; fit again")
        return float(self._size), float(event["noise_std"])
