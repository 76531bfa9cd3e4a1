"""Datasets: the embedded digits, class selection, and clear errors for missing data."""

import numpy as np
import pytest

from suite.gan.data import DataError, load_dataset


def test_digits_at_model_size_in_model_range():
    train = load_dataset("digits", image_size=32, split="train")
    test = load_dataset("digits", image_size=32, split="test")
    assert train.images.shape == (1437, 1, 32, 32) and len(test) == 360
    assert float(train.images.min()) == -1.0 and float(train.images.max()) == pytest.approx(1.0, abs=1e-6)
    assert train.classes == list(range(10)) and train.num_classes == 10
    # the split is stratified: every class is in both halves in about the same proportion
    assert np.bincount(train.labels).min() >= 130 and np.bincount(test.labels).min() >= 30


def test_digits_splits_are_disjoint_and_fixed():
    from sklearn.datasets import load_digits

    raw = load_digits().images.reshape(1797, -1)
    a = load_dataset("digits", 8, "train")
    b = load_dataset("digits", 8, "test")
    # at the native 8x8 size the images are the raw pixels rescaled; find their rows
    rows = lambda d: {int(np.argmin(np.abs(raw - ((img.numpy().ravel() + 1) * 8)).sum(1))) for img in d.images}  # noqa: E731
    assert rows(a).isdisjoint(rows(b)) and len(rows(a)) + len(rows(b)) == 1797
    assert np.array_equal(load_dataset("digits", 8, "train").labels, a.labels)


def test_digits_read_without_scikit_learn_are_its_digits_and_split(tmp_path, monkeypatch):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    bunch = load_digits()
    train, _ = train_test_split(np.arange(1797), test_size=0.2, random_state=0, stratify=bunch.target)
    for cache in ("computed", "cached"):  # the split computed into an empty cache, then read back from it
        monkeypatch.setenv("SUITE_CACHE", str(tmp_path))
        data = load_dataset("digits", 8, "train")
        assert np.array_equal(data.labels, bunch.target[np.sort(train)]), cache
        assert np.allclose((data.images.numpy()[:, 0] + 1) * 8, bunch.images[np.sort(train)], atol=1e-5), cache
    assert len(list(tmp_path.glob("digits-split-*.npz"))) == 1


def test_class_selection_keeps_labels_and_prior():
    data = load_dataset("digits", 16, classes=[3, 7])
    assert data.classes == [3, 7] and data.num_classes == 10
    prior = data.class_prior()
    assert set(prior) == {3, 7} and sum(prior.values()) == pytest.approx(1.0)
    assert set(data.of_class(7).labels) == {7}


def test_limit_and_fetch():
    data = load_dataset("digits", 16, limit=50)
    images, labels = data.fetch([0, 5, 49])
    assert len(data) == 50 and images.shape == (3, 1, 16, 16) and labels.tolist() == data.labels[[0, 5, 49]].tolist()


def test_missing_torchvision_dataset_names_the_path_and_the_fix(tmp_path):
    with pytest.raises(DataError) as info:
        load_dataset("mnist", 32, root=tmp_path / "nowhere")
    message = str(info.value)
    assert str(tmp_path / "nowhere") in message and "download: true" in message and "dataset.root" in message


def test_missing_imagenet_folder(tmp_path):
    with pytest.raises(DataError, match="ImageFolder layout at .*train"):
        load_dataset("imagenet", 32, root=tmp_path)


def test_imagenet_folder_is_read_lazily(tmp_path):
    from PIL import Image

    for label in ("a", "b"):
        (tmp_path / "train" / label).mkdir(parents=True)
        for i in range(3):
            Image.fromarray(np.full((40, 48, 3), 60 * i, dtype=np.uint8)).save(tmp_path / "train" / label / f"{i}.png")
    data = load_dataset("imagenet", 16, root=tmp_path)
    assert data.images is None and len(data) == 6 and data.num_classes == 2
    images, labels = data.fetch([0, 4])
    assert images.shape == (2, 3, 16, 16) and labels.tolist() == [0, 1]
    assert float(images.min()) >= -1 and float(images.max()) <= 1
    batches = list(data.of_class(1).batches([np.array([0, 1]), np.array([2])], workers=1))
    assert [b[0].shape[0] for b in batches] == [2, 1] and all((b[1] == 1).all() for b in batches)


def test_bad_requests_are_clear_errors():
    with pytest.raises(DataError, match="dataset.name: unknown dataset 'svhn'"):
        load_dataset("svhn")
    with pytest.raises(DataError, match=r"dataset.classes: \[10\]"):
        load_dataset("digits", 16, classes=[1, 10])
    with pytest.raises(DataError, match="dataset.split"):
        load_dataset("digits", 16, split="val")
