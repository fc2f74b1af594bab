"""A saved Synthesizer read back: its privacy report re-derived and checked against its settings, and its samplers
rebuilt from the releases (or the generator's weights) it holds. What :meth:`Synthesizer.load` calls."""
from __future__ import annotations

from ..methods.registry import METHODS
from ..privacy import PrivacyReport
from ..privacy.verify import ClaimMismatch, verify_adapted_decoder, verify_report

__all__ = ["class_samplers", "sampler", "verified_report"]


def verified_report(blob: dict, settings, *, adapted: bool, source: str) -> PrivacyReport:
    """The saved report, re-derived from its ledger, refused unless it is that of ``settings`` (the method and the
    target ε) and, for an ``adapted`` decoder, unless it holds the DP-SGD release."""
    try:
        report = PrivacyReport.from_json(blob["report"])
    except (ValueError, TypeError) as err:
        raise ClaimMismatch(f"{source} holds no readable privacy report ({err}); fit again") from None
    verify_report(report, source=source)
    verify_adapted_decoder(report, adapted=adapted, source=source)
    if report.method != settings.method or (report.private and report.target_epsilon != settings.privacy.epsilon):
        raise ClaimMismatch(f"{source}: its privacy report ({report.method}, target epsilon "
                            f"{report.target_epsilon}) is not that of its settings ({settings.method}, "
                            f"{settings.privacy.epsilon}): the file was edited; fit again")
    return report


def class_samplers(state: dict, report: PrivacyReport, *, source: str):
    """A conditional fit's (samplers, reports, shares) by class, each class's releases the ones ``report``
    accounts."""
    from ..methods.model import FlowModel

    parts = state["classes"]
    if sorted(parts) != sorted(str(e["class"]) for e in report.conditional["per_class"]):
        raise ValueError(f"{source}: its classes and its privacy report's differ; fit again")
    reports = {int(c): PrivacyReport.from_json(p["report"]) for c, p in parts.items()}
    for c, rep in reports.items():  # each class's claim is the one the combined report verified
        if rep.ledger != report.conditional["ledgers"][str(c)]:
            raise ValueError(f"{source}: class {c}'s releases are not the ones its privacy report accounts")
    samplers = {int(c): FlowModel.from_state_dict(p["model"], report=reports[int(c)]) for c, p in parts.items()}
    return samplers, reports, {int(c): float(p["share"]) for c, p in parts.items()}


def sampler(state: dict, report: PrivacyReport, method: str, *, device: str, source: str):
    """A flow's FlowModel of its recorded releases, or a generator's network with its weights."""
    if METHODS[method].kind == "flow":
        from ..methods.model import FlowModel

        return FlowModel.from_state_dict(state, report=report)
    network = METHODS[method].load().NETWORK  # the method's module says what it trains
    if state["network"] != network.__name__:
        raise ValueError(f"{source} holds a {state['network']}, but {method} trains a {network.__name__}")
    model = network(**state["init_kwargs"], device=device)
    model.load_state_dict(state["weights"])
    model.eval()
    return model
