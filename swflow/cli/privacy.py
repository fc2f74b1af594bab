"""`swflow privacy`: the budget calculator, epsilon <-> noise multiplier, for a run's shape."""
from __future__ import annotations

import json

from ..methods.registry import method
from ._common import UsageError, privacy_args, run_plan, settings, shape_args


def _sensitivity(what, run, plan, cal):
    """The sensitivity bound the run's noise is scaled to (for the spectral bound: that of a typical draw)."""
    from ..privacy import projection_sensitivity
    from ..kernels.sliced import random_directions

    if what.noise_on == "gradient":  # dpsgd-sw-gen: the noise is on the clipped gradient
        from ..methods.generators.dpsgd_sw import gradient_sensitivity

        return gradient_sensitivity(activation_clip=run.options.activation_clip,
                                    jacobian_clip=run.options.jacobian_clip, norm_bound=run.privacy.norm_bound,
                                    batch_size=plan.sample_size)
    if what.release.of_counts:
        from ..privacy import histogram_sensitivity

        return histogram_sensitivity(plan.n_projections, adjacency=run.privacy.adjacency)
    if run.privacy.sensitivity_bound == "spectral":  # depends on the drawn directions: show a typical draw
        import torch

        theta = random_directions(plan.n_projections, plan.dim, generator=torch.Generator().manual_seed(0),
                                  dtype=torch.float64)
        return projection_sensitivity(kind="spectral", k=plan.n_projections, d=plan.dim,
                                      adjacency=run.privacy.adjacency, norm_bound=run.privacy.norm_bound, theta=theta)
    return cal.sensitivity()


def cmd_privacy(args) -> int:
    from ..privacy import calibrate

    run = settings(args)
    spec = run.privacy
    if not spec.private:
        raise UsageError("nothing to compute: the run is not private")
    what = method(run.method)
    planned = run_plan(run, args.dataset_size, args.dim)
    if what.local:
        return _local_privacy(args, spec)
    steps, plan, bins = planned.steps, planned.release, planned.bins
    cal = calibrate(spec, plan)
    sens = _sensitivity(what, run, plan, cal)
    delta_total = cal.delta_accountant + plan.releases * cal.delta_theta
    out = {"method": args.method, "mode": cal.mode, "epsilon": cal.epsilon, "delta": delta_total,
           "delta_sensitivity": plan.releases * cal.delta_theta, "adjacency": spec.adjacency,
           "accountant": cal.accountant.name, "noise_multiplier": cal.noise_multiplier,
           "sensitivity_bound": sens.kind, "sensitivity": sens.value,
           "noise_std": cal.noise_multiplier * sens.value, "sample_rate": plan.rows_per_release / plan.dataset_size,
           "batch_size": plan.sample_size, "releases": plan.releases, "steps": steps,
           "n_projections": plan.n_projections, "dim": plan.dim, "norm_bound": spec.norm_bound,
           "dataset_size": plan.dataset_size}
    if bins is not None:
        out.update(bins=bins, noise="discrete Gaussian (OpenDP)" if plan.noise == "discrete-gaussian" else "Gaussian")
    if args.json:
        print(json.dumps(out))
        return 0
    from ..privacy import statement

    print(statement(cal.epsilon, delta_total, cal.accountant.name, spec.adjacency))
    typical = " (typical draw; exact per step)" if sens.kind == "spectral" else ""
    print(f"  noise multiplier {cal.noise_multiplier:.4f} ({cal.mode} mode)")
    print(f"  sensitivity {sens.value:.4f} [{sens.kind}]{typical}, noise std {out['noise_std']:.4f}")
    if bins is not None:
        print(f"  one release of the {plan.n_projections} x {bins} count matrix of all {plan.dataset_size} rows' "
              f"projections ({out['noise']} noise); every flow step after it is free ({steps} steps)")
    else:
        print(f"  {plan.releases} release(s) of {plan.rows_per_release} of {plan.dataset_size} rows on "
              f"{plan.n_projections} directions in d={plan.dim}; flow steps {steps}")
    return 0


def _local_privacy(args, spec) -> int:
    """One local Gaussian release per record: y + N(0, σ² I), calibrated exactly as the run does."""
    from ..privacy import calibrate_local, statement

    cal = calibrate_local(spec, dataset_size=args.dataset_size, dim=args.dim)
    sensitivity = 2 * spec.norm_bound
    out = {"method": args.method, "mode": cal.mode, "epsilon": cal.epsilon, "delta": spec.delta,
           "adjacency": "local (any two values of a record)", "accountant": cal.accountant.name,
           "noise_multiplier": cal.noise_multiplier, "sensitivity": sensitivity,
           "noise_std": cal.noise_multiplier * sensitivity, "releases": 1, "dim": args.dim,
           "norm_bound": spec.norm_bound, "dataset_size": args.dataset_size}
    if args.json:
        print(json.dumps(out))
    else:
        print(statement(cal.epsilon, spec.delta, cal.accountant.name, "local (any two values of a record)"))
        print(f"  each record released once as y + N(0, sigma^2 I), sigma = {out['noise_std']:.4f} "
              f"(multiplier {cal.noise_multiplier:.4f} x 2R); everything after it is post-processing")
    return 0


def register(sub) -> None:
    """Add this module's commands to the `swflow` parser."""
    p = sub.add_parser("privacy", help="budget calculator: epsilon <-> noise multiplier",
                       description="Calibrate the noise multiplier for a target epsilon, or report the "
                       "epsilon of a multiplier, for a run of the given shape. Example (the paper's MNIST "
                       "setting): swflow privacy --method dpswflow-r --noise-multiplier 0.67 "
                       "--dataset-size 30000 --dim 8 --epochs 35")
    shape_args(p, with_data_shape=True)
    privacy_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_privacy)
