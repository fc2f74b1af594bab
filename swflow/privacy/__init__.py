"""Privacy: sensitivity bounds, mechanisms, the ledger, accountants, calibration and reports.

Every noise draw that touches private data happens in :class:`PrivateTarget`, which records it
in a :class:`PrivacyLedger` read by real accountants (dp-accounting, Opacus).
"""
from .accountants import ACCOUNTANTS, Accountant, accountant_for, epsilon_from_events
from .amplification import diffusion_gamma
from .calibrate import (Calibration, PrivacySpec, ReleasePlan, calibrate, calibrate_local, noise_multiplier_for,
                        plan_events)
from .histogram import HistogramTarget, histogram_sensitivity
from .ledger import MechanismEvent, PrivacyLedger
from .mechanisms import (analytic_gaussian_epsilon, analytic_gaussian_multiplier, classical_gaussian_multiplier,
                         local_gaussian_std)
from .noise import NoiseSource
from .release import BudgetExhausted, LocallyReleasedTarget, PrivateTarget, check_rows
from .report import PrivacyReport, compose, privacy_report, statement, write_report
from .sensitivity import (ADJACENCIES, BOUNDS, SensitivityBound, bernstein_bound, clt_bound, projection_sensitivity,
                          spectral_bound)
from .targets import (FixedNoiseTarget, ShardedTarget, histogram_target, local_target, private_target, sharded_target)

__all__ = [
    "ACCOUNTANTS", "Accountant", "accountant_for", "ADJACENCIES", "analytic_gaussian_epsilon",
    "analytic_gaussian_multiplier",
    "bernstein_bound", "BOUNDS", "BudgetExhausted", "calibrate", "calibrate_local", "Calibration",
    "check_rows", "classical_gaussian_multiplier", "clt_bound", "diffusion_gamma", "epsilon_from_events",
    "FixedNoiseTarget", "histogram_sensitivity", "histogram_target", "HistogramTarget",
    "local_gaussian_std", "local_target",
    "LocallyReleasedTarget", "MechanismEvent", "noise_multiplier_for", "NoiseSource", "plan_events",
    "compose", "privacy_report", "PrivacyLedger", "PrivacyReport", "PrivacySpec", "private_target", "PrivateTarget",
    "projection_sensitivity", "ReleasePlan", "SensitivityBound", "sharded_target", "ShardedTarget",
    "spectral_bound", "statement", "write_report",
]
