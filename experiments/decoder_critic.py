"""Can a fresh critic improve the shipped sampling decoder after its training? Two routes, public images only.

A critic D(x, z) is trained with the logistic loss to tell public images (with their codes z = E(x)) from the
frozen decoder's samples G(z, u) at the same codes; --critic spectral is the decoder's own critic architecture
(spectral normalisation), --critic r1 the same network without it and with an R1 gradient penalty on the real
images (a stronger critic; Mescheder et al. 2018). Then:

1. resampling: for each code, draw M noise vectors and keep one candidate with probability proportional to
   exp D(G(z, u), z). For the optimal logistic critic exp D = p_public(x | z) / p_decoder(x | z), so this is
   importance resampling toward the public images' law (discriminator rejection sampling, Azadi et al. 2019).
   Noise and critic are public, so on released codes it is post-processing; it costs M decodes per image.
2. fine-tuning (--finetune-steps): the decoder trained further against that critic (the decoder's own code and
   pooled-L1 terms kept, Adam at --finetune-lr, averaged weights), scored every --eval-every steps.

Each row decodes the same --n held-out public codes (the public split's last rows, which the critic never
trains on) with the same noise seed, and reports FID@n against the dataset's test part and the copy rate.
Rows are written to the JSON as they finish. Measured numbers: docs/results.md ("The decoder: what was tried").

    python experiments/decoder_critic.py --critic spectral --critic-steps 2000 --candidates 1 4 8
    python experiments/decoder_critic.py --critic r1 --critic-steps 1000 --candidates 4 --finetune-steps 2000
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn


def logistic_critic_step(critic, optimizer, real, fake, z, *, r1: float) -> float:
    """One update of the logistic loss softplus(−D(real)) + softplus(D(fake)) (+ r1/2 · ‖∇ₓD(real)‖²)."""
    real = real.detach().requires_grad_(r1 > 0)
    score = critic(real, z)
    loss = nn.functional.softplus(-score).mean() + nn.functional.softplus(critic(fake.detach(), z)).mean()
    if r1 > 0:
        grad, = torch.autograd.grad(score.sum(), real, create_graph=True)
        loss = loss + r1 / 2 * grad.pow(2).sum((1, 2, 3)).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


@torch.no_grad()
def resample(decoder, critic, codes: torch.Tensor, candidates: int, *, seed: int, chunk: int = 500) -> np.ndarray:
    """One image per code (n, C, H, W): ``candidates`` noise draws, one kept with probability ∝ exp D."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(0, len(codes), chunk):
        z = codes[i:i + chunk].repeat_interleave(candidates, 0)
        images = decoder(z, torch.randn(len(z), decoder.noise_dim, generator=g))
        images = images.reshape(-1, candidates, *images.shape[1:])
        if candidates > 1:
            weights = torch.softmax(critic(images.flatten(0, 1), z).reshape(-1, candidates), dim=1)
            keep = torch.multinomial(weights, 1, generator=g).squeeze(1)
        else:
            keep = torch.zeros(len(images), dtype=torch.long)
        out.append(images[torch.arange(len(images)), keep])
    return torch.cat(out).numpy()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", default="fashion-mnist-adv2", help="a sampling-decoder checkpoint")
    p.add_argument("--critic", choices=("spectral", "r1"), default="r1")
    p.add_argument("--r1", type=float, default=0.05, help="R1 weight of --critic r1")
    p.add_argument("--critic-steps", type=int, default=1000, help="critic updates against the frozen decoder")
    p.add_argument("--candidates", type=int, nargs="+", default=[1, 4], help="M noise draws per code (1: plain)")
    p.add_argument("--finetune-steps", type=int, default=0)
    p.add_argument("--finetune-lr", type=float, default=1e-4)
    p.add_argument("--eval-every", type=int, default=1000)
    p.add_argument("--n", type=int, default=5000, help="held-out public codes decoded and scored")
    p.add_argument("--n-reference", type=int, help="test images in the FID reference (default: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="experiments/out/decoder_critic.json")
    p.add_argument("--json", action="store_true", help="print the rows as one JSON object")
    p.add_argument("--smoke", action="store_true", help="digits, a few steps, 40 codes, a temporary folder (CI)")
    args = p.parse_args(argv)
    if args.smoke:
        args.checkpoint, args.critic_steps, args.finetune_steps, args.eval_every = "digits-adv", 3, 2, 2
        args.n, args.n_reference, args.candidates = 40, 40, [1, 2]
        args.out = str(Path(tempfile.mkdtemp()) / "decoder_critic.json")

    from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn, update_bn

    from autoencoders import load_autoencoder
    from autoencoders.adversarial import AdversarialConfig, ProjectionCritic
    from swflow.evaluate.metrics import FeatureStats, InceptionFeatures, frechet_distance, reference_features
    from swflow.evaluate.copies import copy_rate
    from swflow.evaluate.runs import load_reference
    from autoencoders.encoded import encoded_split

    say = (lambda *_: None) if args.json else (lambda text: print(text, flush=True))
    torch.manual_seed(args.seed)
    model, meta = load_autoencoder(args.checkpoint)
    encoder, decoder = model.encoder.eval().requires_grad_(False), model.decoder.eval()
    public = encoded_split(meta["dataset"], "public", checkpoint=args.checkpoint)
    train = torch.from_numpy(public.images[:-args.n])  # the critic's rows
    codes = public.latents[-args.n:]  # scored, never seen by the critic
    reference = load_reference({"dataset": meta["dataset"], "autoencoder": args.checkpoint})
    extractor = InceptionFeatures()
    reference_images = reference.images[:args.n_reference]
    real = FeatureStats.of(reference_features(reference_images, key=f"{reference.key}-{len(reference_images)}",
                                              extractor=extractor))
    pool = reference.training if reference.training is not None else public.images
    out = Path(args.out)
    rows = json.loads(out.read_text()) if out.exists() else {}
    setting = f"{args.checkpoint}/{args.critic}/{args.critic_steps}/n{args.n}/seed{args.seed}"

    def score(name: str, images: np.ndarray, seconds: float) -> None:
        fid = frechet_distance(real, FeatureStats.of(extractor(images)))
        copies = copy_rate(images, pool, reference_images)[0]
        rows[f"{setting}/{name}"] = {"fid": fid, "n": len(images), "copy_rate": copies, "decode_seconds": seconds,
                                     "reference": reference.description}
        say(f"{name}: FID@{len(images)} {fid:.2f}, copy rate {copies:.3f}")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(rows, indent=2) + "\n")

    channels, size = meta["image_shape"][0], meta["image_shape"][-1]
    critic = ProjectionCritic(channels, meta["latent"], width=meta["decoder"]["width"], size=size,
                              spectral=args.critic == "spectral")
    r1 = args.r1 if args.critic == "r1" else 0.0
    opt_d = torch.optim.Adam(critic.parameters(), lr=2e-4, betas=(0.0, 0.99))
    batch = AdversarialConfig.batch_size

    def draw(z):
        return decoder(z, torch.randn(len(z), decoder.noise_dim))

    for step in range(args.critic_steps):
        x = train[torch.randint(len(train), (batch,))]
        with torch.no_grad():
            z = encoder(x)
            fake = draw(z)
        loss = logistic_critic_step(critic, opt_d, x, fake, z, r1=r1)
        if step % 250 == 0:
            say(f"critic step {step}: loss {loss:.3f}")
    critic.eval()
    for m in args.candidates:
        started = time.perf_counter()
        images = resample(decoder, critic, codes, m, seed=args.seed + 5)
        score(f"resample-M{m}", images, time.perf_counter() - started)

    if args.finetune_steps:
        cfg = AdversarialConfig()
        opt_g = torch.optim.Adam(decoder.parameters(), lr=args.finetune_lr, betas=(0.0, 0.99))
        average = AveragedModel(decoder, multi_avg_fn=get_ema_multi_avg_fn(cfg.ema_decay))
        pooled = nn.functional.avg_pool2d
        decoder.train()
        critic.train()
        for step in range(1, args.finetune_steps + 1):
            x = train[torch.randint(len(train), (batch,))]
            z = encoder(x)
            fake = draw(z)
            logistic_critic_step(critic, opt_d, x, fake, z, r1=r1)
            loss = (nn.functional.softplus(-critic(fake, z)).mean()
                    + cfg.code_weight * ((encoder(fake) - z) ** 2).sum(1).mean()
                    + cfg.lowpass_weight * (pooled(fake, 4) - pooled(x, 4)).abs().mean())
            opt_g.zero_grad()
            loss.backward()
            opt_g.step()
            average.update_parameters(decoder)
            if step % args.eval_every == 0 or step == args.finetune_steps:
                update_bn([encoder(train[i:i + batch]) for i in range(0, 64 * batch, batch)], average)
                started = time.perf_counter()
                images = resample(average.module.eval(), critic, codes, 1, seed=args.seed + 5)
                score(f"finetune-{step}", images, time.perf_counter() - started)
                decoder.train()
    if args.json:
        print(json.dumps({k: v for k, v in rows.items() if k.startswith(setting)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
