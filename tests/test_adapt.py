"""DP adaptation of the decoder (issue 36): one budget for the histogram and DP-SGD, accounted from the ledger,
cross-checked with Opacus's own accountant, audited white-box, and written where it says what it saw."""
import json
import math

import h5py
import numpy as np
import pytest
import torch

from swflow.cli import main

ARGS = ["--method", "dpswflow-hist", "--epsilon", "2", "--delta", "1e-5", "--steps", "20", "--n-particles", "200",
        "--adapt-decoder", "--adapt-steps", "6", "--adapt-batch-size", "32"]


@pytest.fixture(scope="module")
def adapted_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("adapt") / "run"
    assert main(["generate", "--dataset", "digits", *ARGS, "--quiet", "--out", str(run)]) == 0
    return run


def test_the_composed_epsilon_is_a_direct_dp_accounting_composition_of_the_ledger(adapted_run):
    import dp_accounting as dpa
    from dp_accounting import rdp

    report = json.loads((adapted_run / "privacy.json").read_text())
    histogram, dp_sgd = report["ledger"]
    assert histogram["sensitivity_bound"] == "histogram" and dp_sgd["count"] == 6 and dp_sgd["sample_size"] == 32
    assert dp_sgd["sensitivity"] == pytest.approx(2.0)  # a replaced image moves the clipped sum by 2C, C = 1
    # dp-accounting built here from the ledger's numbers, independently of swflow's accountant code
    accountant = rdp.RdpAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    accountant.compose(dpa.GaussianDpEvent(histogram["noise_multiplier"]))
    accountant.compose(dpa.SampledWithoutReplacementDpEvent(
        dp_sgd["dataset_size"], dp_sgd["sample_size"], dpa.GaussianDpEvent(dp_sgd["noise_multiplier"])), 6)
    direct = accountant.get_epsilon(report["delta_accountant"])
    assert report["epsilon"] == pytest.approx(direct, rel=1e-9) and report["epsilon"] <= 2.0
    assert report["target_epsilon"] == 2.0 and "THEN the decoder was adapted to the private images by DP-SGD" in report["release"]


@pytest.mark.parametrize("objective", ["pixel", "critic"])
def test_the_dp_sgd_part_agrees_with_opacus_own_accountant(objective):
    import dp_accounting as dpa
    from dp_accounting import rdp

    from autoencoders import load_autoencoder
    from autoencoders.adapt import adapt_decoder
    from swflow.io.data import example_images
    from swflow.core.config import AdaptSettings
    from swflow.privacy import NoiseSource

    images, _ = example_images()
    model, _ = load_autoencoder("digits-adv")
    settings = AdaptSettings(adapt_decoder=True, adapt_steps=5, adapt_batch_size=40, adapt_objective=objective)
    codes = model.encode_images(images[:100])  # stand-in for the released particles
    adapted, event, opacus = adapt_decoder(model, images, codes, multiplier=1.3, settings=settings, adjacency="replace-one",
                                     noise=NoiseSource(0), progress=False)
    # what Opacus's optimizer actually did, from its own accountant: noise multiplier 2z on C, q = b/n, 5 steps
    ((noise_multiplier, sample_rate, steps),) = opacus.history
    assert (noise_multiplier, steps) == (2 * 1.3, 5) and sample_rate == pytest.approx(40 / len(images))
    assert event.noise_multiplier == 1.3 and event.count == 5 and event.sample_size == 40
    moved = [not torch.equal(a, b) for a, b in zip(adapted.decoder.state_dict().values(),
                                                    model.decoder.state_dict().values())]
    assert any(moved)  # the decoder learned (the input checkpoint's own decoder is untouched: a copy was adapted)
    # Opacus's epsilon (Poisson, add/remove) is dp-accounting's for the same events under that relation
    accountant = rdp.RdpAccountant(neighboring_relation=dpa.NeighboringRelation.ADD_OR_REMOVE_ONE)
    accountant.compose(dpa.PoissonSampledDpEvent(sample_rate, dpa.GaussianDpEvent(noise_multiplier)), steps)
    assert opacus.get_epsilon(1e-5) == pytest.approx(accountant.get_epsilon(1e-5), rel=0.02)
    # and the claim swflow makes (replace-one, batches without replacement, sensitivity 2C) is never below it
    from swflow.privacy import epsilon_from_events

    ours = epsilon_from_events((event,), delta=1e-5, adjacency="replace-one")
    assert ours >= opacus.get_epsilon(1e-5)


def test_the_adapted_decoder_is_an_output_that_says_what_it_saw(adapted_run, tmp_path, capsys):
    from autoencoders import CHECKPOINT_DIR, load_autoencoder
    from swflow.io.data import example_images

    meta = json.loads((adapted_run / "decoder.json").read_text())
    report = json.loads((adapted_run / "privacy.json").read_text())
    assert "private images of this run by DP-SGD" in meta["trained_on"] and report["statement"] in meta["trained_on"]
    assert meta["adapted_from"]["name"] == "digits-adv" and not list(CHECKPOINT_DIR.glob("decoder*"))
    load_autoencoder(adapted_run / "decoder.pt", expected_sha256=report["run_config"]["decoder_sha256"])  # weights only
    # no private image in the outputs
    private = {image.tobytes() for image in (example_images()[0] * 255).round().astype(np.uint8)}
    with h5py.File(adapted_run / "samples.h5") as f:
        assert not any(image.tobytes() in private for image in f["images"][:])
    # sample re-derives the composed claim, and refuses an edited DP-SGD release
    assert main(["sample", str(adapted_run), "--n", "20", "--quiet", "--out", str(tmp_path / "more")]) == 0
    assert json.loads((tmp_path / "more" / "privacy.json").read_text())["epsilon"] == report["epsilon"]
    import shutil

    edited = tmp_path / "edited"
    shutil.copytree(adapted_run, edited)
    report["ledger"][1]["noise_multiplier"] *= 3
    report["ledger"][1]["noise_std"] *= 3
    (edited / "privacy.json").write_text(json.dumps(report))
    assert main(["sample", str(edited), "--n", "20", "--quiet", "--out", str(tmp_path / "x")]) == 2
    assert "inconsistent" in capsys.readouterr().err


def test_composed_whitebox_audit_stays_below_the_claim_and_flags_halved_dp_sgd_noise():
    from swflow.pipeline.audits import composed_whitebox_audit

    for eps in (1.0, 2.0):
        # 4 million trials: at 1 million the lower bound of one draw spreads over 0.36-0.55 at eps = 1 (seeds 0-3)
        honest = composed_whitebox_audit(eps, count_noise="gaussian", trials=4_000_000)
        assert honest["claimed_epsilon"] <= eps and 0.5 * eps <= honest["audited_epsilon_lower_bound"] <= eps
        # 8 million: at 1 million the halved bound spreads over 0.85-1.04 at eps = 1 (seeds 0-2), at 8 over 1.07-1.20
        halved = composed_whitebox_audit(eps, count_noise="gaussian", halve_dp_sgd_noise=True, trials=8_000_000)
        assert halved["audited_epsilon_lower_bound"] > eps


def test_a_synthesizer_adapts_saves_and_loads_with_the_composed_claim(tmp_path):
    from swflow import Synthesizer
    from swflow.io.data import example_images

    images, _ = example_images()
    syn = Synthesizer("dpswflow-hist", epsilon=2.0, delta=1e-5, autoencoder="digits-adv", adapt_decoder=True,
                      adapt_steps=4, adapt_batch_size=32, steps=10).fit(images)
    report = syn.privacy_report()
    assert len(report.ledger) == 2 and report.epsilon <= 2.0 and not math.isinf(report.epsilon)
    x = syn.sample(30, progress=False)
    again = type(syn).load(syn.save(tmp_path / "m.pt")).sample(30, progress=False)
    assert np.array_equal(np.asarray(x), np.asarray(again))
    with pytest.raises(ValueError, match="adapt_decoder"):
        Synthesizer("dpswflow-hist", epsilon=2.0, delta=1e-5, adapt_decoder=True).fit(torch.randn(50, 3) / 3)


def test_the_critic_takes_one_clipped_gradient_per_private_image():
    """Opacus's per-sample gradients of the critic's loss: row i is the gradient of private image i's hinge term plus
    that of generated image i (Opacus sums a layer's per-sample gradients over the calls of one backward), clipped
    as one, which is what the 2C sensitivity assumes. Checked against autograd on each pair alone."""
    from opacus import GradSampleModule

    from autoencoders.adversarial import ProjectionCritic

    torch.manual_seed(0)
    critic = ProjectionCritic(1, 4, width=4, size=8, spectral=False)
    real, fake = torch.rand(5, 1, 8, 8), torch.rand(5, 1, 8, 8)
    real_codes, fake_codes = torch.randn(5, 4), torch.randn(5, 4)
    parameters = [p for p in critic.parameters()]
    per_image = {}  # the reference, before Opacus hooks the critic
    for name, images, codes, sign in (("real", real, real_codes, -1), ("fake", fake, fake_codes, 1)):
        per_image[name] = [torch.autograd.grad(torch.relu(1 + sign * critic(images[i:i + 1], codes[i:i + 1])).sum(),
                                               parameters) for i in range(5)]
    sampler = GradSampleModule(critic, batch_first=True, loss_reduction="mean")
    (torch.relu(1 - sampler(real, real_codes)).mean() + torch.relu(1 + sampler(fake, fake_codes)).mean()).backward()
    for k, p in enumerate(parameters):
        expected = torch.stack([real_i[k] + fake_i[k] for real_i, fake_i in zip(per_image["real"], per_image["fake"])])
        assert torch.allclose(p.grad_sample, expected, atol=1e-5)  # (5, ...): one row per private image
    sampler._close()


def test_an_adapted_decoder_without_its_dp_sgd_release_is_refused(adapted_run, tmp_path, capsys):
    """Issue 53: deleting the DP-SGD event showed eps = 0.9 while the samples were still decoded by the privately
    trained decoder."""
    import shutil

    from swflow.privacy import MechanismEvent, accountant_for, epsilon_from_events, statement

    edited = tmp_path / "edited"
    shutil.copytree(adapted_run, edited)
    report = json.loads((edited / "privacy.json").read_text())
    report["ledger"] = report["ledger"][:1]
    events = (MechanismEvent(**report["ledger"][0]),)
    report["epsilon"] = epsilon_from_events(events, delta=report["delta_accountant"], adjacency=report["adjacency"])
    report["target_epsilon"] = report["epsilon"]  # every field consistent: only the decoder gives it away
    report["steps"] = 1
    report["accountant"] = accountant_for(events, adjacency=report["adjacency"]).name
    report["statement"] = statement(report["epsilon"], report["delta"], report["accountant"], report["adjacency"])
    (edited / "privacy.json").write_text(json.dumps(report))
    assert main(["sample", str(edited), "--n", "20", "--quiet", "--out", str(tmp_path / "x")]) == 2
    assert "no DP-SGD release" in capsys.readouterr().err


def test_the_budget_split_is_reported_as_the_accountant_composes_it(adapted_run):
    """Issue 53: at adapt_share 0.1 the histogram alone was charged 1.956 of 2.0 under the run's RDP composition, so
    DP-SGD got about 2 % of epsilon, not 10 %: the report now says what each release costs, recomputed here from the
    ledger with the run's own accountant and the histogram's exact one."""
    from swflow.privacy import MechanismEvent, accountant_for, epsilon_from_events

    report = json.loads((adapted_run / "privacy.json").read_text())
    histogram, dp_sgd = (MechanismEvent(**e) for e in report["ledger"])
    delta = report["delta_accountant"]
    alone = epsilon_from_events((histogram,), delta=delta, adjacency=report["adjacency"])
    composed = accountant_for((histogram, dp_sgd), adjacency=report["adjacency"])
    charged = composed.epsilon((histogram,), delta=delta)
    both = composed.epsilon((histogram, dp_sgd), delta=delta)
    note = report["budget_split"]
    assert f"alone it would claim {alone:.4f}" in note and f"charges the histogram {charged:.4f}" in note
    assert f"the DP-SGD stage adds {both - charged:.4f}" in note and composed.name in note
    assert both == pytest.approx(report["epsilon"], rel=1e-4) and charged > alone
