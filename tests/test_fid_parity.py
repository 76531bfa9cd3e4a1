"""The suite's Inception FID against pytorch-fid's own pipeline, on the same images, offline.

pytorch-fid's weights cannot be downloaded here, so both pipelines load one randomly initialised
FID-Inception (pytorch-fid's ``fid_inception_v3`` structure) from a file: pytorch-fid through its
``load_state_dict_from_url`` (handed the file instead of the URL), the suite through its
``--inception-weights`` path (``metrics.inception_weights``) with that file's hash pinned.
"""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import torch
from PIL import Image

from suite.measure.metrics.features import feature_net
from suite.measure.metrics.protocol import protocol_images, quantise_8bit
from suite.measure.metrics.scores import frechet_distance, statistics
from suite.records.integrity import sha256_file


def random_fid_inception(path: Path) -> None:
    """pytorch-fid's FID-Inception with random weights, saved as a state dict to ``path``.

    ``fid_inception_v3`` builds the network and loads pytorch-fid's weights from a URL; both loads are
    skipped, leaving torch's default initialisation. Its batch-norm statistics are then set from one
    batch of noise (train mode, cumulative average), so that features keep an ordinary scale.
    """
    from pytorch_fid import inception as pfi
    from torchvision.models.inception import Inception3

    torch.manual_seed(0)
    with (
        mock.patch.object(pfi, "load_state_dict_from_url", lambda *a, **k: None),
        mock.patch.object(Inception3, "load_state_dict", lambda self, state: None),
    ):
        net = pfi.fid_inception_v3()
    for module in net.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.reset_running_stats()
            module.momentum = None
    with torch.no_grad():
        net.train()(torch.rand(2, 3, 299, 299) * 2 - 1)
    torch.save(net.eval().state_dict(), path)


def smooth_samples(n: int, channels: int, size: int, seed: int) -> torch.Tensor:
    """``n`` generator-like float images in [-1, 1]: blurred noise through tanh."""
    generator = torch.Generator().manual_seed(seed)
    noise = torch.randn(n, channels, size // 4, size // 4, generator=generator)
    return torch.tanh(2 * torch.nn.functional.interpolate(noise, size=(size, size), mode="bilinear"))


def save_pngs(images: torch.Tensor, folder: Path) -> None:
    """One PNG per image, written the way samples are saved for pytorch-fid: torchvision's ``save_image``."""
    from torchvision.utils import save_image

    folder.mkdir()
    for i, image in enumerate(images):
        save_image((image + 1) / 2, folder / f"{i:03d}.png")


def test_quantise_8bit_gives_the_bytes_of_a_png(tmp_path):
    images = smooth_samples(3, 3, 8, seed=1)
    save_pngs(images, tmp_path / "png")
    stored = np.stack([np.asarray(Image.open(tmp_path / "png" / f"{i:03d}.png")) for i in range(3)])
    assert np.array_equal(quantise_8bit(images).permute(0, 2, 3, 1).numpy(), stored)
    assert protocol_images(images, "suite") is images  # the suite protocol scores the samples as generated


@pytest.mark.slow
def test_the_suites_inception_fid_is_pytorch_fids(tmp_path, monkeypatch):
    """Grey 28 px samples against RGB 32 px ones (MNIST's and CIFAR's native sizes), six of each."""
    from pytorch_fid import fid_score
    from pytorch_fid import inception as pfi

    weights = tmp_path / "random-fid-inception.pth"
    random_fid_inception(weights)
    grey, rgb = smooth_samples(6, 1, 28, seed=2), smooth_samples(6, 3, 32, seed=3)
    save_pngs(grey, tmp_path / "grey")
    save_pngs(rgb, tmp_path / "rgb")

    state = torch.load(weights, map_location="cpu", weights_only=True)
    activations = []  # pytorch-fid's pool3 features of each folder, kept on their way to its statistics
    get_activations = fid_score.get_activations
    with (
        mock.patch.object(pfi, "load_state_dict_from_url", lambda *a, **k: state),
        mock.patch.object(
            fid_score, "get_activations", lambda *a, **k: activations.append(get_activations(*a, **k)) or activations[-1]
        ),
    ):
        theirs = fid_score.calculate_fid_given_paths(
            [str(tmp_path / "grey"), str(tmp_path / "rgb")], batch_size=50, device="cpu", dims=2048, num_workers=0
        )

    monkeypatch.setattr("suite.measure.metrics.inception.PYTORCH_FID_HASH_PREFIX", sha256_file(weights))
    net = feature_net("inception", "mnist", 28, inception_weights=str(weights))
    features = [net(protocol_images(images, "standard"))[0] for images in (grey, rgb)]
    for mine, pytorch_fids in zip(features, activations, strict=True):
        assert np.array_equal(mine, pytorch_fids)  # 8-bit samples reach the network bit for bit as the PNGs do
    ours = frechet_distance(*statistics(features[0]), *statistics(features[1]))
    assert ours == pytest.approx(theirs, rel=1e-6)
    assert theirs > 1  # two different sets: a distance well above rounding
