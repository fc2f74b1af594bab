"""A user's own images end to end: train-ae --images, generate --images, evaluate --reference."""
import json

import numpy as np
import pytest
from PIL import Image, ImageFilter

from swflow.cli import main
from swflow.images import load_images


def _shapes(n: int, rng, *, top: bool, squares: float, size: int = 24) -> np.ndarray:
    """uint8 (n, size, size): white discs or squares on black; 'top' puts them in the upper half."""
    y, x = np.mgrid[:size, :size]
    out = np.empty((n, size, size), dtype=np.uint8)
    for i in range(n):
        r = rng.integers(3, 7)
        cy, cx = rng.integers(6, 10) if top else rng.integers(6, 18), rng.integers(6, 18)
        if rng.random() < squares:
            mask = (abs(y - cy) <= r) & (abs(x - cx) <= r)
        else:
            mask = (y - cy) ** 2 + (x - cx) ** 2 <= r * r
        out[i] = mask * 255
    return out


@pytest.fixture(scope="module")
def collections(tmp_path_factory):
    root = tmp_path_factory.mktemp("own")
    rng = np.random.default_rng(0)
    (root / "public").mkdir()
    for i, img in enumerate(_shapes(240, rng, top=False, squares=0.5)):
        Image.fromarray(img).save(root / "public" / f"{i:04d}.png")
    np.save(root / "private.npy", _shapes(300, rng, top=True, squares=0.9))
    np.save(root / "reference.npy", _shapes(100, rng, top=True, squares=0.9))
    return root


def test_folder_and_array_read_alike(tmp_path):
    """The folder reader (Pillow) and the array reader (torch, antialiased) resize by the same rule."""
    rng = np.random.default_rng(1)
    pictures = rng.integers(0, 256, size=(5, 40, 48), dtype=np.uint8)
    pictures = np.stack([np.asarray(Image.fromarray(p).filter(ImageFilter.BLUR))
                         for p in pictures])  # smooth pictures: resampling kernels then agree closely
    (tmp_path / "dir").mkdir()
    for i, p in enumerate(pictures):
        Image.fromarray(p).save(tmp_path / "dir" / f"{i}.png")
    np.save(tmp_path / "a.npy", pictures)
    np.save(tmp_path / "last.npy", pictures[..., None])  # channels last
    from_dir = load_images(tmp_path / "dir", size=20)
    from_array = load_images(tmp_path / "a.npy", size=20)
    assert from_dir.shape == from_array.shape == (5, 1, 20, 20)
    assert np.abs(from_dir - from_array).mean() < 0.02
    assert np.array_equal(load_images(tmp_path / "last.npy", size=20), from_array)
    # centre crop: the 48-wide pictures lose 4 columns each side; at full size nothing is resampled
    assert np.array_equal(load_images(tmp_path / "a.npy", size=40)[:, 0], pictures[:, :, 4:44] / np.float32(255))


@pytest.mark.parametrize("array, message", [
    (np.full((3, 8, 8), np.nan, dtype=np.float32), "NaN"),
    (np.full((3, 8, 8), 2.0, dtype=np.float32), "outside \\[0, 1\\]"),
    (np.zeros((3, 8, 8), dtype=np.int64), "dtype"),
    (np.zeros((3, 5, 8, 8), dtype=np.uint8), "C = 1"),
])
def test_bad_image_arrays_say_what_to_do(tmp_path, array, message):
    np.save(tmp_path / "x.npy", array)
    with pytest.raises(ValueError, match=message):
        load_images(tmp_path / "x.npy", size=8)


def test_own_images_end_to_end(collections, tmp_path, capsys):
    models, run = tmp_path / "models", tmp_path / "run"
    assert main(["train-ae", "--images", str(collections / "public"), "--name", "shapes", "--out-dir", str(models),
                 "--epochs", "2", "--decoder-steps", "10"]) == 0
    meta = json.loads((models / "shapes.json").read_text())
    assert meta["dataset"] == "images" and meta["source"]["count"] == 240
    assert meta["split"]["private_size"] == 0 and meta["decoder"]["kind"].startswith("conditional GAN")

    checkpoint = str(models / "shapes.pt")
    # the public images themselves are refused as private data; --images needs its autoencoder
    assert main(["generate", "--images", str(collections / "public"), "--checkpoint", checkpoint, "--method",
                 "dpswflow-hist", "--epsilon", "1", "--out", str(run)]) == 2
    assert main(["generate", "--images", str(collections / "private.npy"), "--method", "dpswflow-hist",
                 "--epsilon", "1", "--out", str(run)]) == 2
    assert not run.exists()

    assert main(["generate", "--images", str(collections / "private.npy"), "--checkpoint", checkpoint, "--method",
                 "dpswflow-hist", "--epsilon", "1", "--n-particles", "300", "--out", str(run)]) == 0
    report = json.loads((run / "privacy.json").read_text())
    assert report["epsilon"] <= 1.0 and report["dataset_size"] == 300
    config = report["run_config"]
    assert config["manifold"] == "sphere" and config["public_images"]["sha256"] == meta["source"]["sha256"]
    assert (run / "samples.png").exists() and (run / "flow.gif").exists()

    assert main(["evaluate", str(run), "--n-fid", "0"]) == 2  # an --images run names its reference
    assert main(["evaluate", str(run), "--reference", str(collections / "reference.npy"), "--n-fid", "0"]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["reference"].startswith("100 images of") and np.isfinite(metrics["latent_sw"])
    assert main(["sample", str(run), "--n", "50", "--out", str(tmp_path / "more")]) == 0

    # --decoder nearest-public: every sample is one of the public images (as the checkpoint reads them)
    nearest = tmp_path / "nearest"
    assert main(["generate", "--images", str(collections / "private.npy"), "--checkpoint", checkpoint, "--method",
                 "dpswflow-hist", "--epsilon", "1", "--n-particles", "40", "--decoder", "nearest-public",
                 "--out", str(nearest)]) == 0
    import h5py

    public = {image.tobytes() for image in load_images(collections / "public", size=meta["image_shape"][-1],
                                                        channels=meta["image_shape"][0])}
    with h5py.File(nearest / "samples.h5") as f:
        assert all(image.astype(np.float32).tobytes() in public for image in f["images"][:])
