"""The settings of a run, as frozen dataclasses that import nothing heavy (no torch): what a user asks for
before any data is read. The command line's options, the TOML tables and the Synthesizer's keywords are
all derived from these fields (swflow/pipeline/options.py, swflow/pipeline/settings.py), so `swflow --help`
needs no torch.

    PrivacySpec        [privacy]  the budget and how it is accounted
    RunShape           [shape]    how long a run is, and what a step touches
    SimulatorSettings  [flow]     the particle simulator
    FlowConfig                    SimulatorSettings plus the planned step count (what the simulator runs)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

__all__ = ["ACCOUNTANTS", "ADJACENCIES", "AdaptSettings", "BOUNDS", "COMPOSITIONS", "LABELS_PRIVATE", "LABELS_PUBLIC", "PUBLIC_ADJACENCY", "ClippedGradientOptions", "DTYPE_NAMES", "FlowConfig", "INITS", "MANIFOLDS", "MAX_EPSILON",
           "NOISES", "PARTICLE_CDFS", "PrivacySpec", "RunShape", "SMOOTHINGS", "SimulatorSettings"]

#: neighbouring data sets: a record replaced by any other, or by the null record (the zero row); n stays public
ADJACENCIES = ("replace-one", "zero-out", "add-remove")
#: sensitivity bounds of a projection release (swflow/privacy/sensitivity.py)
BOUNDS = ("bernstein", "clt", "spectral")
#: the accountant families a user may name: 'rdp': dp-accounting RDP (replace-one, sampling without replacement,
#: or no sampling); 'pld': dp-accounting PLD (zero-out with Poisson sampling)
ACCOUNTANTS = ("rdp", "pld")
#: 'gaussian': continuous N(0, σ²) noise; 'discrete-gaussian': OpenDP's discrete Gaussian on integer counts
NOISES = ("gaussian", "discrete-gaussian")
#: the largest epsilon a private run may claim; above it the guarantee is void and the report would be
#: unreadable (the accountants return inf), so such runs are refused
MAX_EPSILON = 1e6
#: a conditional run (one flow per class): the adjacency it states when labels are public, and the two ways it
#: composes the classes' releases (swflow/pipeline/conditional.py; read back by swflow/privacy/verify.py)
PUBLIC_ADJACENCY = "replace-one within a class (labels and class counts public)"
LABELS_PUBLIC = "parallel over classes (labels and class counts public)"
LABELS_PRIVATE = "one Gaussian mechanism across the classes' histograms (labels private)"
COMPOSITIONS = (LABELS_PUBLIC, LABELS_PRIVATE)

INITS = ("normal", "sphere")
SMOOTHINGS = ("exact", "sampled")
MANIFOLDS = ("ball", "sphere")
PARTICLE_CDFS = ("sorted", "binned")
DTYPE_NAMES = ("float32", "float64")


@dataclass(frozen=True)
class PrivacySpec:
    """What the user asks for. Give ``epsilon`` (calibrate the noise) or ``noise_multiplier``
    (report the ε it buys); ``epsilon=inf`` with no multiplier runs without privacy.

    adjacency : 'replace-one' (default, the papers' setting), 'zero-out', or 'add-remove' (table runs only: a record
        added or removed, n private and estimated from a released count)
    accountant : None (default: the one that covers the adjacency and batch sampling), 'rdp'
        (dp-accounting RDP: replace-one, or no sampling) or 'pld' (dp-accounting PLD: zero-out, Poisson)
    sensitivity_bound : 'spectral' (default: ‖Θ‖₂ of the drawn directions, deterministic),
        'bernstein' (003 Lemma 2, costs δθ per release) or 'clt' (004 Eq. 23, a normal
        approximation that under-covers: offered to reproduce the paper, with a warning)
    norm_bound : R, rows must have norm ≤ R (R = 1 for latents on the unit sphere)
    clip : clip rows outside the ball to norm R instead of refusing them
    delta_sensitivity_share : part of δ spent on the failure probability of a probabilistic bound
    secure_noise : draw privacy noise from the OS CSPRNG
    count_noise : the noise of a release of counts (the sliced histogram): 'discrete-gaussian' (default,
        OpenDP's exact sampler) or 'gaussian' (float noise, seeded or with ``secure_noise``)
    """

    epsilon: float | None = None
    delta: float = field(default=1e-5, metadata={"help": "total delta; must be below 1/n"})
    noise_multiplier: float | None = None
    adjacency: str = field(default="replace-one", metadata={
        "choices": ADJACENCIES,
        "help": "replace-one: fixed-size batches, dp-accounting RDP (the papers' setting); zero-out: Poisson "
                "batches, dp-accounting PLD for Poisson substitution (a sampled null record still adds a noise "
                "column, which Opacus' add/remove bound does not cover); add-remove: table runs only (a record added "
                "or removed, the peers' unit; n is private and estimated from a released count)"})
    accountant: str | None = field(default=None, metadata={
        "choices": ACCOUNTANTS,
        "help": "default: the one that covers the adjacency and sampling (rdp for replace-one or full batches, "
                "pld for zero-out with Poisson batches); any other is refused"})
    sensitivity_bound: str = field(default="spectral", metadata={
        "choices": BOUNDS,
        "help": "spectral: ||Theta||_2 of the drawn directions (deterministic); bernstein: 003 Lemma 2 (spends "
                "part of delta); clt: the paper's normal approximation (not a proof)"})
    norm_bound: float = 1.0
    clip: bool = False
    delta_sensitivity_share: float = 0.1
    secure_noise: bool = field(default=False, metadata={
        "help": "draw privacy noise from the OS CSPRNG (not reproducible)"})
    count_noise: str = field(default="discrete-gaussian", metadata={
        "choices": NOISES,
        "help": "noise on released counts (dpswflow-hist): discrete-gaussian, exact integer noise from OpenDP's "
                "sampler (no floating-point attack surface; not reproducible from a seed), or gaussian, float noise "
                "(from the seeded privacy stream, or the OS CSPRNG with --secure-noise)"})

    def __post_init__(self):
        if (self.epsilon is None) == (self.noise_multiplier is None):
            raise ValueError("give exactly one of epsilon= (target budget) or noise_multiplier= "
                             "(report the budget it buys); epsilon=inf runs without privacy")
        if self.epsilon is not None and not (self.epsilon > 0):
            raise ValueError(f"epsilon must be > 0 (inf for no privacy), got {self.epsilon}")
        if self.epsilon is not None and MAX_EPSILON < self.epsilon < math.inf:
            raise ValueError(f"epsilon = {self.epsilon:g} protects nothing (above {MAX_EPSILON:g}): give a "
                             "meaningful budget, or inf for a run that says it is not private")
        if self.noise_multiplier is not None and not (self.noise_multiplier > 0 and
                                                      math.isfinite(self.noise_multiplier)):
            raise ValueError(f"noise_multiplier must be a finite number > 0, got {self.noise_multiplier}")
        if not 0 < self.delta < 1:
            raise ValueError(f"delta must be in (0, 1), got {self.delta}")
        if self.sensitivity_bound not in BOUNDS:
            raise ValueError(f"sensitivity_bound must be one of {BOUNDS}, "
                             f"got {self.sensitivity_bound!r}")
        if not 0 < self.delta_sensitivity_share < 1:
            raise ValueError("delta_sensitivity_share must be in (0, 1)")
        if not (self.norm_bound > 0 and math.isfinite(self.norm_bound)):
            raise ValueError(f"norm_bound must be a finite number > 0, got {self.norm_bound}")
        if self.count_noise not in NOISES:
            raise ValueError(f"count_noise must be one of {NOISES}, got {self.count_noise!r}")

    @property
    def private(self) -> bool:
        return self.noise_multiplier is not None or math.isfinite(self.epsilon)


@dataclass(frozen=True)
class RunShape:
    """How long a run is and what it touches per step: the TOML ``[shape]`` table, the `flow shape`
    options of `generate` and `privacy`, and the estimator's keywords of the same names."""

    steps: int | None = field(default=None, metadata={
        "help": "Euler-Maruyama (or training) steps (default: --epochs, else the method's default length)"})
    epochs: float | None = field(default=None, metadata={"help": "steps = epochs x n / batch"})
    n_projections: int | None = field(default=None, metadata={
        "help": "directions per step (N_theta; M_theta for dpswflow). Default: the method's (70; 32 for "
                "dpswflow-hist)"})
    pool_size: int | None = field(default=None, metadata={
        "help": "dpswflow: directions in the released pool (default: n_projections); dpswflow-hist: directions K "
                "of the released histogram (default: a rule of n and epsilon)"})
    bins: int | None = field(default=None, metadata={
        "help": "dpswflow-hist: bins B per direction on [-R, R] (default: a rule of n and epsilon)"})
    batch_size: int | None = field(default=None, metadata={
        "help": "private rows per step (dpswflow-r, swf, the LDP flow and generators; default: the method's, 250, "
                "or 1000 for ldp-sinkhorn-gen); a batch that covers every row is a full batch, and dpswflow always "
                "releases every row once"})


def _option(default, help: str, choices: tuple | None = None):
    """A FlowConfig field that is also a command-line option and estimator argument (swflow/pipeline/options.py)."""
    return field(default=default, metadata={"help": help, **({"choices": choices} if choices else {})})


@dataclass(frozen=True, kw_only=True)
class SimulatorSettings:
    """The simulator's settings before a run is planned: the TOML ``[flow]`` table, the `simulator`
    options of `swflow generate` and the flow keywords of :class:`~swflow.pipeline.estimator.Synthesizer` are all
    derived from these fields. The run plan adds the step count (:meth:`config`).

    In the Python API, ``record_every = 0`` and ``checkpoint_every = 0`` mean none; which callbacks
    write frames and checkpoints is up to the caller (:mod:`swflow.simulate.callbacks`).
    """

    n_particles: int = _option(10_000, "particles, independent of the number of private rows")
    step_size: float | None = _option(None, "Euler-Maruyama step size h > 0 (default: 1; dpswflow-hist: 3 when "
                                      "n/z >= 2000, else 1)")
    diffusion: float = _option(0.0, "diffusion lambda >= 0 (noise sqrt(2 lambda h) per step)")
    smoothing: str = _option("exact", "particle-side smoothing: the exact Gaussian expectation on a grid, or "
                             "004's one random draw per particle and direction (to reproduce the paper)", SMOOTHINGS)
    smoothing_std: float | None = _option(None, "particle-side smoothing std (default: the release's noise std); "
                                          "for swf (no privacy) it smooths both projected sets (004 4.1)")
    particle_cdf: str | None = _option(None, "with no particle-side smoothing: the particles' ranks by sorting, "
                                       "or read on a 2048-point grid (no sort; faster, within one grid cell). "
                                       "Default: binned for dpswflow-hist, sorted otherwise", PARTICLE_CDFS)
    drift_clip: float | None = _option(None, "clip each particle's drift to this norm")
    init: str | None = _option(None, "mu_0: standard normal, or uniform on the unit sphere (default: sphere on "
                               "the sphere manifold, normal in the ball)", INITS)
    manifold: str = _option("ball", "sphere: particles start on the unit sphere and are retracted onto it after "
                            "each step (post-processing, no privacy cost; for rows on the sphere, as every "
                            "shipped autoencoder makes them); ball: particles move freely", MANIFOLDS)
    record_every: int = _option(0, "trajectory frame every k steps")
    checkpoint_every: int = _option(0, "checkpoint every k steps")
    seed: int = _option(0, "simulator seed (initial particles, directions, diffusion)")
    dtype: str = _option("float32", "particle dtype", DTYPE_NAMES)
    device: str = _option("cpu", "cpu or cuda")

    def __post_init__(self):
        if self.n_particles < 1:
            raise ValueError(f"n_particles must be >= 1, got {self.n_particles}")
        if self.step_size is not None and not (self.step_size > 0 and math.isfinite(self.step_size)):
            raise ValueError(f"step size h must be > 0, got {self.step_size}")
        if not (self.diffusion >= 0 and math.isfinite(self.diffusion)):
            raise ValueError(f"diffusion lambda must be >= 0, got {self.diffusion}")
        if self.smoothing not in SMOOTHINGS:
            raise ValueError(f"smoothing must be one of {SMOOTHINGS}, got {self.smoothing!r}")
        if self.smoothing_std is not None and not (self.smoothing_std >= 0 and math.isfinite(self.smoothing_std)):
            raise ValueError(f"smoothing_std must be a finite number >= 0, got {self.smoothing_std}")
        if self.particle_cdf is not None and self.particle_cdf not in PARTICLE_CDFS:
            raise ValueError(f"particle_cdf must be one of {PARTICLE_CDFS}, got {self.particle_cdf!r}")
        if self.manifold not in MANIFOLDS:
            raise ValueError(f"manifold must be one of {MANIFOLDS}, got {self.manifold!r}")

        if self.drift_clip is not None and not self.drift_clip > 0:
            raise ValueError(f"drift_clip must be > 0, got {self.drift_clip}")
        if self.init is None:  # resolved once, so checkpoints and model files record what ran
            object.__setattr__(self, "init", "sphere" if self.manifold == "sphere" else "normal")
        if self.init not in INITS:
            raise ValueError(f"init must be one of {INITS}, got {self.init!r}")
        if self.manifold == "sphere" and self.init != "sphere":
            raise ValueError("the sphere manifold starts the particles on the sphere: leave init unset or 'sphere'")
        if self.dtype not in DTYPE_NAMES:
            raise ValueError(f"dtype must be one of {DTYPE_NAMES}, got {self.dtype!r}")
        if self.record_every < 0 or self.checkpoint_every < 0:
            raise ValueError("record_every and checkpoint_every must be >= 0")

    def config(self, *, steps: int, step_size: float) -> "FlowConfig":
        """These settings for a run of ``steps`` steps at the run plan's ``step_size`` (this one's, when set)."""
        own = {f.name: getattr(self, f.name) for f in fields(SimulatorSettings)}
        return FlowConfig(**{**own, "step_size": step_size}, steps=steps)


@dataclass(frozen=True, kw_only=True)
class FlowConfig(SimulatorSettings):
    """What the simulator runs: :class:`SimulatorSettings` with the number of Euler–Maruyama steps K
    (set from --steps / --epochs / the method's default) and a step size."""

    steps: int
    step_size: float = _option(1.0, "Euler-Maruyama step size h > 0")

    def __post_init__(self):
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1, got {self.steps}")
        if self.step_size is None:
            raise ValueError("a flow needs a step size h > 0")
        super().__post_init__()


@dataclass(frozen=True)
class ClippedGradientOptions:
    """dpsgd-sw-gen's own options: a help text makes each a --flag, a TOML [options] key and a Synthesizer
    keyword (swflow.pipeline.settings)."""

    activation_clip: float = field(default=1.0, metadata={"help": "dpsgd-sw-gen: M, bound on generated norms"})
    jacobian_clip: float = field(default=1.0, metadata={
        "help": "dpsgd-sw-gen: L, bound on each per-sample Jacobian's spectral norm"})

    def __post_init__(self):
        if not (self.activation_clip > 0 and self.jacobian_clip > 0):
            raise ValueError("activation_clip and jacobian_clip must be > 0")


ADAPT_OBJECTIVES = ("pixel", "critic")


@dataclass(frozen=True)
class AdaptSettings:
    """The ``[adapt]`` table: DP adaptation of the public decoder to the private images
    (autoencoders/adapt.py), part of the same (ε, δ). Off by default; it needs images and an autoencoder with a sampling decoder."""

    adapt_decoder: bool = field(default=False, metadata={
        "help": "teach the decoder the private images inside the run's budget by DP-SGD (Opacus; see "
                "adapt_objective): for private data the public images never showed (the run's files then hold the "
                "adapted decoder)"})
    adapt_share: float = field(default=0.1, metadata={
        "help": "the histogram release is calibrated alone to (1 - share) x epsilon, then the DP-SGD adaptation gets "
                "the smallest noise whose composition with it stays within epsilon. Composition is not additive: the "
                "DP-SGD stage's part of the composed epsilon can be far below share x epsilon, and privacy.json "
                "states it (budget_split). Default chosen on a public shift (experiments/adapt_share.py)"})
    adapt_objective: str = field(default="pixel", metadata={
        "help": "pixel: DP-SGD on the decoder, 4x-pooled L1 to each private image and the code term; critic: DP-SGD "
                "on a critic of the private images, the decoder learning against it from the released codes. "
                "pixel is the default: at epsilon <= 10 on 4 500 images the critic's noise cost more than it taught "
                "(docs/unseen.md)", "choices": ADAPT_OBJECTIVES})
    adapt_steps: int = field(default=300, metadata={"help": "DP-SGD steps (critic: one decoder step each)"})
    adapt_batch_size: int = field(default=64, metadata={"help": "private images per DP-SGD step"})
    adapt_lr: float = field(default=2e-4, metadata={"help": "Adam learning rate of the decoder"})
    adapt_critic_lr: float = field(default=1e-3, metadata={
        "help": "critic objective: Adam learning rate of the critic"})
    adapt_critic_width: int = field(default=32, metadata={
        "help": "critic objective: channels of the critic's first layer (its parameter count, and so the norm of "
                "its DP noise, grows with the square)"})
    adapt_clip: float = field(default=1.0, metadata={"help": "per-image gradient norm bound C (Opacus clipping)"})

    def __post_init__(self):
        if not 0 < self.adapt_share < 1:
            raise ValueError(f"adapt_share must be in (0, 1), got {self.adapt_share}")
        changed = [f.name for f in fields(self) if f.name != "adapt_decoder" and getattr(self, f.name) != f.default]
        if changed and not self.adapt_decoder:  # a setting that would be ignored is a mistake: say so
            raise ValueError(f"{', '.join(changed)} set{'s' if len(changed) == 1 else ''} the decoder's adaptation, "
                             "which is off: turn on adapt_decoder, or leave them unset")
        if self.adapt_objective not in ADAPT_OBJECTIVES:
            raise ValueError(f"adapt_objective must be one of {ADAPT_OBJECTIVES}, got {self.adapt_objective!r}")
        if self.adapt_steps < 1 or self.adapt_batch_size < 1 or self.adapt_critic_width < 1:
            raise ValueError("adapt_steps, adapt_batch_size and adapt_critic_width must be >= 1")
        if not (self.adapt_lr > 0 and self.adapt_critic_lr > 0 and self.adapt_clip > 0):
            raise ValueError("adapt_lr, adapt_critic_lr and adapt_clip must be > 0")
