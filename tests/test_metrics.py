"""Metrics against closed forms, independent computations and sets of known overlap."""
import numpy as np
import pytest

from swflow.evaluate.metrics import (FeatureStats, downstream_accuracy, frechet_distance, kernel_inception_distance,
                                     precision_recall, reference_features)


def test_frechet_distance_matches_closed_forms():
    rng = np.random.default_rng(0)
    # diagonal covariances: sum (sqrt(s1) - sqrt(s2))^2 plus the squared mean gap
    s1, s2 = rng.uniform(0.5, 2, 5), rng.uniform(0.5, 2, 5)
    m1, m2 = rng.normal(size=5), rng.normal(size=5)
    expected = np.sum((m1 - m2) ** 2) + np.sum((np.sqrt(s1) - np.sqrt(s2)) ** 2)
    got = frechet_distance(FeatureStats(m1, np.diag(s1), 10), FeatureStats(m2, np.diag(s2), 10))
    assert got == pytest.approx(expected, rel=1e-9)
    # full covariances: the textbook formula with scipy's general matrix square root of A B
    from scipy.linalg import sqrtm

    a = rng.normal(size=(6, 6)); a = a @ a.T + 0.1 * np.eye(6)
    b = rng.normal(size=(6, 6)); b = b @ b.T + 0.1 * np.eye(6)
    expected = np.trace(a) + np.trace(b) - 2 * np.trace(np.real(sqrtm(a @ b)))
    got = frechet_distance(FeatureStats(np.zeros(6), a, 10), FeatureStats(np.zeros(6), b, 10))
    assert got == pytest.approx(expected, rel=1e-8)


def test_feature_stats_of_samples():
    x = np.random.default_rng(1).normal(size=(500, 3))
    s = FeatureStats.of(x)
    np.testing.assert_allclose(s.mean, x.mean(0))
    np.testing.assert_allclose(s.cov, np.cov(x.T))
    assert s.n == 500
    with pytest.raises(ValueError, match="n >= 2"):
        FeatureStats.of(x[:1])


def test_reference_features_are_cached_by_content(tmp_path):
    calls = []

    def extractor(images, progress=False):
        calls.append(len(images))
        return images.reshape(len(images), -1)

    images = np.random.default_rng(2).uniform(size=(20, 1, 2, 2)).astype(np.float32)
    a = reference_features(images, key="toy", extractor=extractor, cache_dir=tmp_path)
    b = reference_features(images, key="toy", extractor=extractor, cache_dir=tmp_path)
    assert calls == [20] and np.allclose(a, b) and np.allclose(a, images.reshape(20, -1), atol=1e-7)
    reference_features(images[:10], key="toy", extractor=extractor, cache_dir=tmp_path)  # other pixels: recomputed
    assert calls == [20, 10]


def test_precision_recall_on_sets_of_known_overlap():
    rng = np.random.default_rng(3)
    real = rng.uniform(size=(4000, 2))
    same = rng.uniform(size=(4000, 2))
    shifted = rng.uniform(size=(4000, 2)) + [0.5, 0]  # half of each square lies in the other
    far = rng.uniform(size=(4000, 2)) + [5, 0]
    p, r = precision_recall(real, same)
    assert p > 0.95 and r > 0.95
    p, r = precision_recall(real, shifted)
    assert p == pytest.approx(0.5, abs=0.03) and r == pytest.approx(0.5, abs=0.03)
    assert precision_recall(real, far) == (0.0, 0.0)
    # a collapsed generator: every fake point sits in the real set (precision 1) but covers little
    collapsed = real[0] + 1e-3 * rng.normal(size=(4000, 2))
    p, r = precision_recall(real, collapsed)
    assert p == 1.0 and r < 0.1


def test_downstream_accuracy_learns_real_labels_and_not_shuffled_ones():
    from swflow.io.data import load_digits

    images, labels = load_digits()
    train, test = slice(0, 1200), slice(1200, None)
    acc = downstream_accuracy(images[train], labels[train], images[test], labels[test], epochs=4)  # ~0.94
    assert acc > 0.85
    shuffled = np.random.default_rng(0).permutation(labels[train])
    assert downstream_accuracy(images[train], shuffled, images[test], labels[test], epochs=4) < 0.3


def test_frechet_distance_of_few_samples_equals_the_full_eigendecomposition():
    # the n x n route for rank-deficient covariances against scipy's matrix square root of the product
    from scipy.linalg import sqrtm

    rng = np.random.default_rng(3)
    many, few = rng.normal(size=(200, 30)), rng.normal(1.0, 2.0, size=(12, 30))
    a, b = FeatureStats.of(many), FeatureStats.of(few)
    assert a.centered is None and b.centered is not None
    root = np.real(sqrtm(a.cov @ b.cov))
    expected = float((a.mean - b.mean) @ (a.mean - b.mean) + np.trace(a.cov + b.cov - 2 * root))
    assert np.isclose(frechet_distance(a, b), expected, rtol=1e-6)
    assert np.isclose(frechet_distance(b, a), expected, rtol=1e-6)
    c = FeatureStats.of(rng.normal(size=(9, 30)))  # both sides few
    root = np.real(sqrtm(c.cov @ b.cov))
    expected = float((c.mean - b.mean) @ (c.mean - b.mean) + np.trace(c.cov + b.cov - 2 * root))
    assert np.isclose(frechet_distance(c, b), expected, rtol=1e-5)


def test_fid_with_inception_is_zero_for_a_set_and_grows_with_noise():
    from swflow.evaluate.metrics import InceptionFeatures
    from swflow.io.data import load_digits

    extractor = InceptionFeatures(batch_size=24)
    images = load_digits()[0][:24]
    rng = np.random.default_rng(0)
    noisy = [np.clip(images + s * rng.normal(size=images.shape), 0, 1).astype(np.float32) for s in (0.1, 0.4)]
    feats = [extractor(x) for x in (images, *noisy)]
    assert feats[0].shape == (24, 2048)
    stats = [FeatureStats.of(f) for f in feats]
    self_fid = frechet_distance(stats[0], stats[0])
    fid_small, fid_large = frechet_distance(stats[0], stats[1]), frechet_distance(stats[0], stats[2])
    assert abs(self_fid) < 1e-3 * fid_small
    assert 0 < fid_small < fid_large


def test_onnxruntime_backend_matches_the_torch_weights():
    # The fast CPU backend must give the reference network's features (to 1e-3 of their scale).
    pytest.importorskip("onnxruntime")
    from swflow.evaluate.metrics import InceptionFeatures
    from swflow.io.data import load_dataset

    images = load_dataset("digits")[0][:6]
    reference = InceptionFeatures(backend="torch")(images)
    fast = InceptionFeatures(backend="onnxruntime")
    assert fast.backend == "onnxruntime" and InceptionFeatures(backend="auto").backend == "onnxruntime"
    assert np.abs(fast(images) - reference).max() <= 1e-3 * np.abs(reference).max()


def test_kid_matches_a_direct_unbiased_mmd_and_is_unbiased():
    # independent reference: the unbiased MMD² with the cubic kernel, written out pair by pair
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(12, 3)), rng.normal(size=(12, 3)) + 0.5
    k = lambda a, b: (a @ b / 3 + 1) ** 3  # noqa: E731
    n = len(x)
    direct = (sum(k(x[i], x[j]) for i in range(n) for j in range(n) if i != j) / (n * (n - 1))
              + sum(k(y[i], y[j]) for i in range(n) for j in range(n) if i != j) / (n * (n - 1))
              - 2 * sum(k(x[i], y[j]) for i in range(n) for j in range(n)) / n ** 2)
    kid, _ = kernel_inception_distance(x, y, subsets=3, subset_size=12, groups=3)
    assert kid == pytest.approx(direct, rel=1e-10)  # every subset is the whole set
    # two samples of one law: KID averages to 0 within its standard error; a shifted law is far above
    same_kid, same_se = kernel_inception_distance(rng.normal(size=(2000, 8)), rng.normal(size=(2000, 8)),
                                                  subsets=50, subset_size=200)
    assert abs(same_kid) < 4 * same_se + 1e-6
    far, _ = kernel_inception_distance(rng.normal(size=(500, 8)), rng.normal(size=(500, 8)) + 0.5, subset_size=200)
    assert far > 20 * same_se


@pytest.mark.parametrize("subset_size", [150, 60])
def test_kid_standard_error_matches_the_spread_over_fresh_samples(subset_size):
    # Monte Carlo reference: 300 independent sample pairs of two fixed laws; the reported standard
    # error must match the standard deviation of KID across them (the jackknife is at most mildly
    # conservative; 300 draws give the empirical std to about ±8%). Whole-set subsets (150) and
    # proper subsets (60 of 150) both count.
    rng = np.random.default_rng(11)
    kids, ses = [], []
    for _ in range(300):
        x, y = rng.normal(size=(150, 6)), rng.normal(size=(150, 6)) * 1.2 + 0.2
        kid, se = kernel_inception_distance(x, y, subsets=20, subset_size=subset_size)
        kids.append(kid)
        ses.append(se)
    assert 0.8 < np.mean(ses) / np.std(kids, ddof=1) < 1.35


def test_nearest_distances_match_scikit_learn():
    from sklearn.neighbors import NearestNeighbors

    from swflow.evaluate.copies import nearest_distances

    rng = np.random.default_rng(0)
    pool, queries = rng.random((500, 1, 6, 6)), rng.random((120, 1, 6, 6))
    expected = NearestNeighbors(n_neighbors=1).fit(pool.reshape(500, -1)).kneighbors(queries.reshape(120, -1))[0][:, 0]
    assert np.allclose(nearest_distances(queries, pool, chunk=50), expected, atol=1e-5)


def test_copy_rate_is_one_for_copies_and_about_five_percent_for_held_out_images():
    from swflow.evaluate.copies import copy_rate

    rng = np.random.default_rng(1)
    # images from one distribution: a few prototypes plus pixel noise
    prototypes = rng.random((20, 64))
    def draw(n):
        return (prototypes[rng.integers(0, 20, n)] + 0.15 * rng.standard_normal((n, 64))).reshape(n, 1, 8, 8)
    training, reference, held_out = draw(3000), draw(2000), draw(4000)
    rate, threshold = copy_rate(held_out, training, reference)
    # 4 000 fresh images, each below the reference's 5% quantile with probability 0.05: within 4 standard errors
    assert threshold > 0 and abs(rate - 0.05) < 4 * np.sqrt(0.05 * 0.95 / 4000) + 0.01
    assert copy_rate(training[:500], training, reference)[0] == 1.0
    noisy_copies = training[:500] + 1e-3 * rng.standard_normal(training[:500].shape)
    assert copy_rate(noisy_copies, training, reference)[0] == 1.0
