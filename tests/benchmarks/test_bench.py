"""Speed benchmarks (pytest-benchmark). `make bench` measures them; `make test` runs each once,
except two whose code every test already runs (FID at 2048-d, a whole 2-process run).

They time the pieces a user's numbers are made of, on this machine's device (CUDA when
available): one GAN training step per strategy's network, sampling, the feature network, FID,
the cellular state exchange's serialisation, and one real 2-process run end to end.
Compare machines or commits with ``pytest-benchmark compare`` or ``ci/regression.sh``.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from suite.gan.data import load_dataset
from suite.gan.losses import get_loss, gradient_penalty
from suite.gan.models import build_pair
from suite.gan.sampling import GeneratorBundle, Sampler
from suite.measure.metrics.scores import frechet_distance, statistics
from suite.strategies.cellular.state import load_module_vector, module_vector
from suite.train.engines.base import Replica

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _sync():
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def measured_only(benchmark, condition: bool = True) -> None:
    """Skip under `make test` (benchmarks disabled): the same code runs there in a cheaper case or another test."""
    if condition and benchmark.disabled:
        pytest.skip("measured by `make bench` only: its code runs in the other tests")


@pytest.fixture(scope="module")
def digits():
    return {size: load_dataset("digits", size) for size in (20, 32)}


@pytest.mark.parametrize("image_size", [20, 32])
@pytest.mark.parametrize("loss_name, conditional", [("bce", False), ("bce", True), ("wgan-gp", False)])
def test_bench_gan_step(benchmark, digits, image_size, loss_name, conditional):
    """One discriminator and one generator update on a batch of 64 (the tables' networks)."""
    data = digits[image_size]
    g, d = build_pair(image_size, 1, 100, num_classes=10 if conditional else 0, seed=0)
    g, d = g.to(DEVICE), d.to(DEVICE)
    rg = Replica(g, torch.optim.Adam(g.parameters(), 2e-4, betas=(0.5, 0.999)))
    rd = Replica(d, torch.optim.Adam(d.parameters(), 2e-4, betas=(0.5, 0.999)))
    loss = get_loss(loss_name)
    real, labels = data.fetch(np.arange(64))
    real = real.to(DEVICE)
    labels = labels.to(DEVICE) if conditional else None

    def step():
        with torch.no_grad():
            fake = g(torch.randn(64, 100, device=DEVICE), labels)
        d_loss = loss.discriminator(d(real, labels), d(fake, labels))
        if loss.needs_penalty:
            d_loss = d_loss + 10 * gradient_penalty(d, real, fake, labels)
        rd.zero_grad()
        rd.backward(d_loss)
        rd.step()
        with rd.frozen():
            g_loss = loss.generator(d(g(torch.randn(64, 100, device=DEVICE), labels), labels))
            rg.zero_grad()
            rg.backward(g_loss)
            rg.step()
        _sync()

    benchmark(step)


def test_bench_sampling(benchmark):
    """1,000 samples from a per-class generator bundle (10 generators, 32x32)."""
    generators = {f"class{c}": build_pair(32, 1, 100, seed=c)[0].state_dict() for c in range(10)}
    bundle = GeneratorBundle(
        "per_class", 32, 1, 100, 10, False, generators, {c: 0.1 for c in range(10)}, classes={f"class{c}": c for c in range(10)}
    )
    sampler = Sampler(bundle, DEVICE)
    benchmark(sampler.sample, 1000, 0)


def test_bench_classifier_features(benchmark, digits):
    """Features and probabilities of 1,000 images at 20x20 from the pinned digits ruler (the main job's, in float64)."""
    from suite.measure.metrics.features import ClassifierNet

    net = ClassifierNet("digits", DEVICE)
    images = digits[20].images[:1000]
    benchmark(net, images)


@pytest.mark.parametrize("dim", [128, 2048])
def test_bench_fid(benchmark, dim):
    """FID between two sets of 2,500 features (dominated by the symmetric eigendecompositions at 2048-d)."""
    measured_only(benchmark, dim == 2048)
    rng = np.random.default_rng(0)
    a, b = statistics(rng.normal(size=(2500, dim))), statistics(rng.normal(0.1, 1.1, size=(2500, dim)))
    benchmark(frechet_distance, *a, *b)


def test_bench_cell_state_round_trip(benchmark):
    """Flattening a cell's G and D into the exchanged float32 vector and loading it back."""
    g, d = build_pair(32, 1, 100, seed=0)
    g2, d2 = build_pair(32, 1, 100, seed=1)

    def round_trip():
        vector = torch.cat([module_vector(g), module_vector(d)])
        n = module_vector(g).numel()
        load_module_vector(g2, vector[:n])
        load_module_vector(d2, vector[n:])

    benchmark(round_trip)


@pytest.mark.multiproc
def test_bench_two_process_run(benchmark, tmp_path):
    """A whole 2-process data-parallel run through `suite run` (start-up, 10 steps, record)."""
    measured_only(benchmark)
    from conftest import run_scenario, tiny_scenario

    scenario = tiny_scenario("bench", [{"strategy": "data_parallel", "engine": "torch", "procs": [2]}], train={"steps": 10})
    rounds = itertools.count()

    def run():
        folder = tmp_path / f"round{next(rounds)}"
        folder.mkdir()
        code, _ = run_scenario(folder, scenario)
        assert code == 0

    benchmark.pedantic(run, rounds=3, iterations=1)
