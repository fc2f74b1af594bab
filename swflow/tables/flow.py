"""The particles of a table: relaxed records moved until their two-way marginals are the released ones.

Each of N particles is a relaxed record: per column, a point of the simplex over its cells (the softmax of free
coordinates). The particles' two-way marginal of a pair (i, j) is the mean of their outer products,
M_ij = S_iᵀ S_j / N. The particles follow the gradient flow of the squared discrepancy to the released tables,

    L = Σ_k ‖S_iᵀ S_j / N − T_k / n‖²_F,

discretised by Adam (the step each coordinate takes is normalised, so large and small tables move alike; a named
target's coordinates with a shorter memory of their gradients' size, TARGET_BETAS). The
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
#: Adam's decay rates for a named target's coordinates (every other column keeps torch's default, (0.9, 0.999)): the
#: second moment remembers about 20 steps, not 1 000. With the default the first steps' large gradients stay in the
#: normaliser, and the last small corrections, a class's residue on the particles of a pile beside it, move at a
#: fraction of lr: on issue 94's made-up tables at ε = 10, 0.09-0.13 of the positives' samples stayed on the pile
#: after 1 000 steps, 0.03-0.06 now. Every column under a short memory cost diamonds and default 0.002-0.004 of
#: 3-way TVD; the target's alone, −0.0002 on average over the benchmark (docs/tables-design.md, "Piles")
TARGET_BETAS = (0.9, 0.95)


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
                  config: MarginalFlowConfig = MarginalFlowConfig(), target: int | None = None,
                  progress: bool | str = False) -> list[Tensor]:
    """Particles (one (N, sizes[j]) tensor of probabilities per column) whose two-way marginals on ``pairs`` fit
    the released ``tables`` (each (sizes[i], sizes[j]) noisy counts) divided by the public ``dataset_size``. A
    tuple of three columns among ``pairs`` fits a three-way table alike (experiments/tables_triples.py).
    ``target``: the column a classifier will predict (its index), whose coordinates Adam moves with TARGET_BETAS.
    ``progress``: True shows a bar; 'auto' shows one, with an estimate of the time left, only when the first steps
    say the fit takes over a minute (what a --quiet run still wants to know)."""
    generator = torch.Generator().manual_seed(config.seed)
    gradient = _gradient(tables, sizes, pairs, dataset_size, config.n_particles)
    free = [torch.randn(config.n_particles, k, generator=generator) for k in sizes]
    for column, law in enumerate(pooled_laws(tables, sizes, pairs)):
        if law is not None and float(law.sum()) > 0:  # each particle starts at a record of independent columns
            drawn = torch.multinomial(law.float(), config.n_particles, replacement=True, generator=generator)
            free[column][torch.arange(config.n_particles), drawn] += START_LOGIT
    groups = [{"params": [f for column, f in enumerate(free) if column != target]}]
    if target is not None:
        groups.append({"params": [free[target]], "betas": TARGET_BETAS})
    optimizer = torch.optim.Adam(groups, lr=config.lr)
    with _Progress(config.steps, progress, f"fitting {config.n_particles} particles to {len(pairs)} tables") as bar:
        for _ in range(config.steps):
            simplex = [torch.softmax(f, dim=1) for f in free]
            # the chain rule through each column's softmax: ∂L/∂free = S ⊙ (g − Σ_column S ⊙ g)
            for f, s, g in zip(free, simplex, gradient(simplex)[1]):
                weighted = s * g
                f.grad = weighted - s * weighted.sum(dim=1, keepdim=True)
            optimizer.step()
            bar.step()
    return [torch.softmax(f, dim=1) for f in free]


def _gradient(tables, sizes: list[int], marginals, dataset_size: int, n_particles: int):
    """columns' simplices S_c (each (N, sizes[c])) -> (L, [∂L/∂S_c]): the squared distance of the particles'
    marginals to the released tables, L = Σ_k ‖M_k − T_k / n‖², M_k the particles' marginal on ``marginals[k]``
    (for a pair (i, j), S_iᵀS_j / N), and its gradient: for a pair's residual R, 2 S_j Rᵀ / N on S_i and
    2 S_i R / N on S_j. Written out rather than left to autograd, whose slices of a wide table would each take the
    gradient's full size.

    Each pair is computed by the wider of its columns against all of that column's narrower partners at once (their
    blocks side by side): one product per column and step, N · Σ_pairs cells_i · cells_j in all, where one product
    over every coordinate would cost N · D² (insteval with every student and lecturer a cell: D = 5 164 against
    about 32 cells for their partners; experiments/bench_tables.py). A marginal of three columns is fitted alike,
    by einsum (experiments/tables_triples.py)."""
    owned: dict[int, list[tuple[int, Tensor]]] = {}
    triples = []
    for columns, table in zip(marginals, tables):
        target = table.to(torch.float32) / dataset_size
        if len(columns) == 3:
            triples.append((columns, target))
            continue
        i, j = columns
        if sizes[j] > sizes[i]:  # the wider column computes the pair
            i, j, target = j, i, target.T
        owned.setdefault(i, []).append((j, target))
    products = [(i, [j for j, _ in partners], torch.cat([t for _, t in partners], dim=1))
                for i, partners in owned.items()]

    def gradient(simplex: list[Tensor]) -> tuple[float, list[Tensor]]:
        loss, grad = torch.zeros(()), [torch.zeros_like(s) for s in simplex]
        for i, partners, target in products:
            others = torch.cat([simplex[j] for j in partners], dim=1)  # (N, Σ partners' cells)
            residual = simplex[i].T @ others / n_particles - target
            loss += residual.pow(2).sum()
            grad[i] += others @ residual.T * (2 / n_particles)
            back = simplex[i] @ residual * (2 / n_particles)
            start = 0
            for j in partners:
                grad[j] += back[:, start:start + sizes[j]]
                start += sizes[j]
        for columns, target in triples:
            blocks = [simplex[c] for c in columns]
            residual = torch.einsum("na,nb,nc->abc", *blocks) / n_particles - target
            loss += residual.pow(2).sum()
            for a, spec in enumerate(("nb,nc,abc->na", "na,nc,abc->nb", "na,nb,abc->nc")):
                grad[columns[a]] += torch.einsum(spec, *[blocks[b] for b in range(3) if b != a], residual) * (
                    2 / n_particles)
        return float(loss), grad
    return gradient


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
