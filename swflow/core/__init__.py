"""The shared vocabulary at the bottom of swflow: the settings dataclasses and the names every layer reads
(accountants, noises, adjacencies, limits, label compositions). It imports nothing of swflow and no torch."""
