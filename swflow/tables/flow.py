"""The particles of a table: relaxed records moved until their two-way marginals are the released ones.

Each of N particles is a relaxed record: per column, a point of the simplex over its cells (the softmax of free
coordinates). The particles' two-way marginal of a pair (i, j) is the mean of their outer products,
M_ij = S_iᵀ S_j / N. The particles follow the gradient flow of the squared discrepancy to the released tables,

    L = Σ_k ‖S_iᵀ S_j / N − T_k / n‖²_F,

discretised by Adam (the step each coordinate takes is normalised, so large and small tables move alike). The
targets are the noisy counts over the public n, as released: unbiased. Clipping them at zero, or reading counts
below 2σ as zero (the image histogram's rule), scored within 0.001 of them in mean 3-way TVD on swflow's example
table at ε = 1 and 10 (experiments/tables_defaults.py), so the unbiased targets stay.

The particles start as records of independent columns: each column's cell drawn from its one-way law pooled over the
released tables, its logit raised by START_LOGIT above Gaussian jitter. A class of a few percent then holds its
share of the particles from the first step; from the jitter alone (every particle near the simplex's centre), 1 000
steps left a rare class's mass spread thinly over particles that belong elsewhere (ISLR's credit default, 3 % of
rows, without noise: P(default | balance cell) 0.015 where the rows have 0, and a classifier's AUC 0.888 where the
rows give 0.934; docs/tables-design.md, "Rare classes").

A sampled record draws one particle, then each column's cell from that particle's distribution, independently:
the expected two-way marginals of the samples are the particles' own. Everything here reads the released tables
only: post-processing.

Why not the sliced-Wasserstein drift of the image flows: on one-hot records a pair-block direction's target is a
set of atoms, and the 1-D transport moved relaxed particles onto the atoms' values without moving them to the
simplex vertices (measured on Adult without noise: mean 3-way TVD 0.25 after 100 steps, where this flow reaches
0.08); the marginal discrepancy's gradient does not have that freedom.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .shrinkage import pooled_laws

__all__ = ["MarginalFlowConfig", "fit_particles", "sample_cells"]

#: the logit a particle's starting cell gets above the N(0, 1) jitter of every cell (its weight about 0.95 among 2
#: cells, 0.4 among 32): chosen on the benchmark's tuning tables against 0 (the jitter alone) and 6
START_LOGIT = 3.0


@dataclass(frozen=True)
class MarginalFlowConfig:
    """n_particles: N relaxed records; steps and lr: Adam's; seed: the public randomness (initial particles);
    shrink: the released tables shrunk first, toward independence or a third column's link
    (:func:`~swflow.tables.shrinkage.shrunk_tables`), which lowers the marginals' error at small n·ε but can shrink
    away a weak dependence that a classifier trained on the samples needs
    (docs/tables-design.md, "Shrinkage"); target: a column a classifier will predict, whose tables are fitted as
    released, never shrunk (shrinkage erases a rare class's links first: docs/tables-design.md, "Rare classes")."""

    n_particles: int = 2000
    steps: int = 1000
    lr: float = 0.05
    seed: int = 0
    shrink: bool = True
    target: str | None = None

    def __post_init__(self):
        if self.n_particles < 1 or self.steps < 1 or not self.lr > 0:
            raise ValueError(f"n_particles and steps must be >= 1 and lr > 0, got {self}")
        if not isinstance(self.shrink, bool):
            raise ValueError(f"shrink is True or False, got {self.shrink!r}")


def fit_particles(tables: list[Tensor], sizes: list[int], pairs: list[tuple[int, ...]], *, dataset_size: int,
                  config: MarginalFlowConfig = MarginalFlowConfig(), progress: bool | str = False) -> list[Tensor]:
    """Particles (one (N, sizes[j]) tensor of probabilities per column) whose two-way marginals on ``pairs`` fit
    the released ``tables`` (each (sizes[i], sizes[j]) noisy counts) divided by the public ``dataset_size``. A
    tuple of three columns among ``pairs`` fits a three-way table alike (experiments/tables_triples.py).
    ``progress``: True shows a bar; 'auto' shows one, with an estimate of the time left, only when the first steps
    say the fit takes over a minute (what a --quiet run still wants to know)."""
    generator = torch.Generator().manual_seed(config.seed)
    offsets = [0]
    for k in sizes:
        offsets.append(offsets[-1] + k)
    gradient = _gradient(tables, offsets, pairs, dataset_size, config.n_particles)
    block = _blocks(offsets)
    free = torch.randn(config.n_particles, offsets[-1], generator=generator)
    for column, law in enumerate(pooled_laws(tables, sizes, pairs)):
        if law is not None and float(law.sum()) > 0:  # each particle starts at a record of independent columns
            drawn = torch.multinomial(law.float(), config.n_particles, replacement=True, generator=generator)
            free[torch.arange(config.n_particles), offsets[column] + drawn] += START_LOGIT
    optimizer = torch.optim.Adam([free], lr=config.lr)
    with _Progress(config.steps, progress, f"fitting {config.n_particles} particles to {len(pairs)} tables") as bar:
        for _ in range(config.steps):
            simplex = _softmax_blocks(free, block)
            # the chain rule through each block's softmax: ∂L/∂free = S ⊙ (g − Σ_block S ⊙ g)
            weighted = simplex * gradient(simplex)[1]
            free.grad = weighted - simplex * _block_sums(weighted, block)[:, block]
            optimizer.step()
            bar.step()
    simplex = _softmax_blocks(free, block)
    return [simplex[:, a:b].clone() for a, b in zip(offsets[:-1], offsets[1:])]


def _gradient(tables, offsets: list[int], pairs, dataset_size: int, n_particles: int):
    """simplex S (N, D) -> (L, ∂L/∂S): the squared distance of the particles' two-way marginals to the released
    tables, L = Σ_k ‖S_iᵀS_j / N − T_k / n‖², and its gradient, 2 (S_j R_kᵀ, S_i R_k) / N on the pair's blocks
    for the residual R_k. Written out rather than left to autograd: a wide table's slices would each give their
    gradient the full (N, D) size.

    Dense pairs: every measured table is a block of one D × D matrix, the particles' second moment SᵀS / N, so one
    matrix product per step serves every pair. Sparse pairs (a wide table's few per column): the pairs grouped by
    their shape (cells_i, cells_j), one batched product per group, N · Σ_pairs cells_i · cells_j per step instead
    of N · D²."""
    columns = len(offsets) - 1
    if all(len(p) == 2 for p in pairs) and 2 * len(pairs) > columns * (columns - 1) // 2:
        target = torch.zeros(offsets[-1], offsets[-1])
        measured = torch.zeros_like(target)
        for (i, j), table in zip(pairs, tables):
            target[offsets[i]:offsets[i + 1], offsets[j]:offsets[j + 1]] = table.to(torch.float32) / dataset_size
            measured[offsets[i]:offsets[i + 1], offsets[j]:offsets[j + 1]] = 1.0

        def dense(simplex):
            residual = measured * (simplex.T @ simplex / n_particles - target)
            return residual.pow(2).sum(), simplex @ (residual + residual.T) * (2 / n_particles)
        return dense
    return _sparse_gradient(tables, offsets, pairs, dataset_size, n_particles)


def _sparse_gradient(tables, offsets: list[int], marginals, dataset_size: int, n_particles: int):
    """_gradient's sparse path, for marginals of two or three columns (``marginals``: tuples of column indices):
    the marginals grouped by their shape, one batched product per group, and for each of a marginal's columns
    ∂L/∂S_a = 2/N · Σ R · (the other columns' blocks)."""
    groups: dict[tuple[int, ...], list] = {}
    for columns, table in zip(marginals, tables):
        groups.setdefault(tuple(table.shape), []).append((columns, table.to(torch.float32) / dataset_size))
    batches = [([torch.cat([torch.arange(offsets[c[a]], offsets[c[a] + 1]) for c, _ in group])
                 for a in range(len(shape))], torch.stack([t for _, t in group]), shape)
               for shape, group in groups.items()]

    def sparse(simplex):
        loss, grad = 0.0, torch.zeros_like(simplex)
        for index, target, shape in batches:
            blocks = [simplex[:, i].view(n_particles, -1, size) for i, size in zip(index, shape)]  # (N, K_b, size)
            axes = [f"nk{letter}" for letter in "ijl"[:len(shape)]]
            joint = "k" + "ijl"[:len(shape)]
            residual = torch.einsum(",".join(axes) + "->" + joint, *blocks) / n_particles - target
            loss += float(residual.pow(2).sum())
            for a in range(len(shape)):
                others = [b for b in range(len(shape)) if b != a]
                part = torch.einsum(",".join([axes[b] for b in others] + [joint]) + "->" + axes[a],
                                    *[blocks[b] for b in others], residual)
                grad.index_add_(1, index[a], part.reshape(n_particles, -1), alpha=2 / n_particles)
        return loss, grad
    return sparse


class _Progress:
    """A tqdm bar over the fit's steps: shown (progress True), never (False), or ('auto') from the sixth step on,
    with an estimate of the time left, when the first five say the whole fit takes over a minute."""

    def __init__(self, total: int, progress, description: str):
        self.total, self.mode, self.description, self.done, self.bar = total, progress, description, 0, None
        if progress is True:
            self.bar = self._open()

    def _open(self):
        from tqdm.auto import tqdm

        return tqdm(total=self.total, initial=self.done, desc=self.description)

    def step(self) -> None:
        import time

        if self.done == 0:
            self.started = time.perf_counter()
        self.done += 1
        if self.bar is not None:
            self.bar.update()
        elif self.mode == "auto" and self.done == 5:
            estimate = (time.perf_counter() - self.started) / 4 * self.total  # the first step warms up: not timed
            if estimate > 60:
                self.bar = self._open()
                self.bar.write(f"{self.description}: about {estimate / 60:.0f} min (from its first steps)")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.close()


def _blocks(offsets: list[int]) -> Tensor:
    """(D,) int64: each coordinate's column."""
    return torch.repeat_interleave(torch.arange(len(offsets) - 1), torch.tensor(offsets).diff())


def _block_sums(values: Tensor, block: Tensor) -> Tensor:
    """(N, C): the sum of ``values`` (N, D) over each column's coordinates."""
    return torch.zeros(values.shape[0], int(block[-1]) + 1, dtype=values.dtype).index_add_(1, block, values)


def _softmax_blocks(free: Tensor, block: Tensor) -> Tensor:
    """(N, D): a softmax within each column's block of coordinates (``block``: _blocks), in one pass over all of
    them."""
    peak = torch.zeros(free.shape[0], int(block[-1]) + 1, dtype=free.dtype).scatter_reduce_(
        1, block.expand(free.shape[0], -1), free, reduce="amax", include_self=False)  # for a stable exp
    weights = torch.exp(free - peak[:, block])
    return weights / _block_sums(weights, block)[:, block]


def sample_cells(particles: list[Tensor], n: int, *, seed: int = 0,
                 conditions: dict[int, int] | None = None) -> Tensor:
    """(n, C) int64 cells: record r takes particle r mod N (every particle used alike), then each column's cell
    drawn from that particle's probabilities (seeded: public randomness).

    ``conditions`` ({column: cell}): records conditioned on those cells. Each particle is drawn with probability
    proportional to its probability of every conditioned cell (its columns are independent given the particle, so
    this is the particles' law given the condition), and the conditioned columns take their cells. Refused when
    the particles give the condition no support."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    generator = torch.Generator().manual_seed(seed)
    count = particles[0].shape[0]
    if conditions:
        weight = torch.ones(count, dtype=torch.float64)
        for column, cell in conditions.items():
            weight = weight * particles[column][:, cell].to(torch.float64)
        if not float(weight.mean()) > 1e-9:
            raise ValueError("the released tables give these conditions no support (the particles' probability of "
                             f"them is {float(weight.mean()):.2g}): no record can be drawn under them")
        owner = torch.multinomial(weight, n, replacement=True, generator=generator)
    else:
        owner = torch.arange(n) % count
        owner = owner[torch.randperm(n, generator=generator)]
    cells = torch.stack([_draw_cells(p, owner, generator) for p in particles], dim=1)
    for column, cell in (conditions or {}).items():
        cells[:, column] = cell
    return cells


def _draw_cells(probabilities: Tensor, owner: Tensor, generator: torch.Generator, chunk: int = 1 << 16) -> Tensor:
    """(n,) int64: a cell for each record from its particle's ``probabilities`` (N, cells), ``chunk`` records at a
    time: memory chunk × cells, not n × cells (10⁶ records of a 256-category column would hold 1 GB)."""
    return torch.cat([torch.multinomial(probabilities[owner[start:start + chunk]], 1, generator=generator).squeeze(1)
                      for start in range(0, len(owner), chunk)])
