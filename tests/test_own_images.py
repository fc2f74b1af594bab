"""A user's own images end to end: train-ae --images, generate --images, evaluate --reference."""
import json

import numpy as np
import pytest
from PIL import Image, ImageFilter

from swflow.cli import main
from swflow.io.images import load_images


def _shapes(n: int, rng, *, top: bool, squares: float, size: int = 24) -> np.ndarray:
    """uint8 (n, size, size): white discs or squares on black; 'top' puts them in the upper half."""
    y, x = np.mgrid[:size, :size]
    out = np.empty((n, size, size), dtype=np.uint8)
    for i in range(n):
        r = rng.integers(3, 7)
        cy, cx = rng.integers(6, 10) if top else rng.integers(11, 18), rng.integers(6, 18)  # no picture in both
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
    assert np.array_equal(from_dir, from_array)  # one resize rule: a picture is the same record either way
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
    # both stages record what they cost: the pixel-loss encoder's and the decoder's wall time
    assert meta["cost"]["wall_seconds"] > 0 and meta["encoder_from"]["cost"]["wall_seconds"] > 0

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

    from swflow.io.hdf5 import to_pixels

    public = {image.tobytes() for image in to_pixels(load_images(collections / "public", size=meta["image_shape"][-1],
                                                                  channels=meta["image_shape"][0]))}
    with h5py.File(nearest / "samples.h5") as f:
        assert all(image.tobytes() in public for image in f["images"][:])


@pytest.fixture(scope="module")
def trained(collections, tmp_path_factory):
    models = tmp_path_factory.mktemp("models")
    assert main(["train-ae", "--images", str(collections / "public"), "--name", "shapes", "--out-dir", str(models),
                 "--epochs", "1", "--decoder-steps", "0"]) == 0
    return models / "shapes.pt"


@pytest.mark.parametrize("which", ["reversed", "all but one", "one mixed in"])
def test_public_images_are_refused_as_private_in_any_order(collections, trained, tmp_path, capsys, which):
    public = np.stack([np.asarray(Image.open(p)) for p in sorted((collections / "public").iterdir())])
    private = np.load(collections / "private.npy")
    given = {"reversed": public[::-1], "all but one": public[1:],
             "one mixed in": np.concatenate([private[:50], public[7:8]])}[which]
    (tmp_path / "given").mkdir()  # a folder of pictures, named in another order, or an array: read alike
    for i, picture in enumerate(given):
        Image.fromarray(picture).save(tmp_path / "given" / f"{i:04d}.png")
    np.save(tmp_path / "given.npy", given)
    for source in ("given", "given.npy"):
        assert main(["generate", "--images", str(tmp_path / source), "--checkpoint", str(trained), "--method",
                     "dpswflow-hist", "--epsilon", "1", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    shared = {"reversed": 240, "all but one": 239, "one mixed in": 1}[which]
    assert f"{shared} of the {len(given)} images" in err and not (tmp_path / "run").exists()


def test_the_nearest_public_decoder_refuses_a_collection_that_gained_an_image(collections, trained, tmp_path, capsys):
    import shutil

    public = tmp_path / "public"
    shutil.copytree(collections / "public", public)
    meta = json.loads(trained.with_suffix(".json").read_text())
    meta["source"]["path"] = str(public)  # the checkpoint now points at a copy we can change
    Image.fromarray(np.load(collections / "private.npy")[0]).save(public / "9999.png")
    models = tmp_path / "models"
    shutil.copytree(trained.parent, models)
    (models / "shapes.json").write_text(json.dumps(meta))
    assert main(["generate", "--images", str(collections / "private.npy"), "--checkpoint", str(models / "shapes.pt"),
                 "--method", "dpswflow-hist", "--epsilon", "1", "--decoder", "nearest-public",
                 "--out", str(tmp_path / "run")]) == 2
    assert "1 of the 241 images" in capsys.readouterr().err


def test_a_resumed_train_ae_refuses_a_partial_file_of_other_images(collections, tmp_path, monkeypatch, capsys):
    import torch

    models = tmp_path / "models"
    calls = {"n": 0}
    real_save = torch.save

    def interrupt_after_first_epoch(obj, f, *args, **kwargs):  # Ctrl-C at the second epoch's save
        calls["n"] += "optimizer" in obj
        if calls["n"] == 2:
            raise KeyboardInterrupt
        real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", interrupt_after_first_epoch)
    assert main(["train-ae", "--images", str(collections / "public"), "--name", "x", "--out-dir", str(models),
                 "--epochs", "3", "--decoder-steps", "0"]) == 130
    err = capsys.readouterr().err
    assert "interrupted: rerun the same command to continue" in err and "Traceback" not in err
    monkeypatch.setattr(torch, "save", real_save)
    assert (models / "x.partial.pt").exists()
    other = tmp_path / "other.npy"
    np.save(other, np.load(collections / "private.npy")[:240])  # as many images, other pixels
    assert main(["train-ae", "--images", str(other), "--name", "x", "--out-dir", str(models), "--epochs", "3",
                 "--decoder-steps", "0"]) == 2
    assert "trained on other images" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["../../x", "sub/dir/x", ".hidden", ""])
def test_a_checkpoint_name_is_a_plain_file_name(collections, tmp_path, capsys, name):
    assert main(["train-ae", "--images", str(collections / "public"), "--name", name, "--out-dir",
                 str(tmp_path / "m"), "--epochs", "1", "--decoder-steps", "0"]) == 2
    err = capsys.readouterr().err
    assert "plain checkpoint name" in err and "Traceback" not in err
    assert not (tmp_path / "m").exists() and not (tmp_path.parent / "x.pt").exists()


def test_train_ae_writes_into_the_current_directory_by_default(collections, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["train-ae", "--images", str(collections / "public"), "--name", "here", "--epochs", "1",
                 "--decoder-steps", "0"]) == 0
    assert (tmp_path / "here.pt").exists() and (tmp_path / "here.json").exists()


def test_sixteen_bit_grey_pictures_keep_their_levels(tmp_path):
    levels = np.linspace(0, 65535, 16 * 16).reshape(16, 16).astype(np.uint16)
    (tmp_path / "d").mkdir()
    Image.fromarray(levels).save(tmp_path / "d" / "a.png")
    read = load_images(tmp_path / "d", size=16)
    assert np.allclose(read[0, 0], levels / 65535.0, atol=1e-6)  # not every nonzero pixel at 1.0
    assert np.allclose(load_images(tmp_path / "d", size=16, channels=3)[0], read[0, 0])


def test_a_picture_beyond_pillows_pixel_limit_is_refused_before_decoding(tmp_path, monkeypatch):
    import PIL.Image

    (tmp_path / "d").mkdir()
    Image.fromarray(np.zeros((40, 40), np.uint8)).save(tmp_path / "d" / "big.png")
    monkeypatch.setattr(PIL.Image, "MAX_IMAGE_PIXELS", 1000)  # a 14 000 x 14 000 picture, scaled down
    with pytest.raises(ValueError, match="more than Pillow's limit"):
        load_images(tmp_path / "d", size=16)
