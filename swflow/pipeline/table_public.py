"""Public rows of a table run: they set the cells at no cost and choose the pairs worth their noise.

The part of :class:`~swflow.pipeline.tables.TableSynthesizer` that reads the public rows (``public=``,
``--public-table``): never a private row, never a budget. Under a privacy unit their own unit column, if any, is
dropped unread, and each column keeps its table with its rows' class whatever they show (swflow/privacy/units.py).
"""
from __future__ import annotations

__all__ = ["TablePublicRows"]


class TablePublicRows:
    """Mixed into TableSynthesizer: ``self.public`` (public rows, a frame or a file, or None)."""

    def _choose_pairs(self, n: int) -> None:
        """The pairs the public rows show worth their noise at this budget and this public n."""
        from ..privacy.histogram import one_release_multiplier
        from ..tables.pairs import choose_pairs

        public = self._public_frame()
        cells, sizes = self.codec.cell_index(public), self.codec.sizes
        unit = self.unit is not None  # the last column is then the rows' class, in a table with every other, always
        columns = len(sizes) - unit
        chosen = choose_pairs(cells[:, :columns], sizes[:columns], dataset_size=n,
                              noise_multiplier=one_release_multiplier(self.privacy) * self._contribution,
                              moved=1 if self.privacy.adjacency == "add-remove" else 2, fixed_tables=columns * unit)
        target = None if self.flow.target is None else self.schema.names.index(self.flow.target)
        with_target = [] if target is None else [tuple(sorted((j, target))) for j in range(columns) if j != target]
        chosen = [*chosen, *(pair for pair in with_target if pair not in chosen)]  # a classifier's links, always
        self.pairs = [*chosen, *((j, columns) for j in range(columns * unit))]
        self.pairs_chosen_by = (f"{len(public)} public rows: the most dependent pairs that minimise their tables' "
                                "error once shrunk plus the dependence left out (swflow.tables.pairs)"
                                + (f", and {self.flow.target!r} (the target) with every column" if with_target else "")
                                + (", and each column with its rows' class" if unit else "")
                                + f": {len(chosen)} pairs")

    def _public_frame(self):
        """The public rows, checked against the schema (once)."""
        from ..tables.files import read_table

        if getattr(self, "_public_checked", None) is None:
            public = self.public
            if not hasattr(public, "columns"):
                public = read_table(public, schema=self.user_schema)
            if len(public) == 0:
                raise ValueError("the public rows are empty: give public rows, or leave public= unset")
            public = self._public_classes(public)  # under a unit: a fill for the class of its rows, never counted
            try:
                self._public_checked = self.schema.check(public, clip=self.clip)
            except ValueError as err:
                raise ValueError(f"the public rows do not fit the schema: {err}") from None
        return self._public_checked

    def _public_weights(self) -> list:
        """Each column's fine counts in the public rows (public: no budget)."""
        import numpy as np

        from .table_cells import _fine_codec

        codec = _fine_codec(self.schema)
        fine = codec.cell_index(self._public_frame())
        self._public_weights_used = [np.bincount(fine[:, j], minlength=c.grid.size).astype(float)
                                     for j, c in enumerate(codec.cells)]
        return self._public_weights_used
