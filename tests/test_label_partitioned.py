"""Label-partitioned training: class ownership, per-class communicators, losses, per-class sampling."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from conftest import run_scenario, tiny_scenario
from suite.config.plan import TrainingError, class_plan
from suite.gan.losses import LOSS_OBJECTS, get_loss, gradient_penalty
from suite.gan.sampling import GeneratorBundle, Sampler

# --- who owns which class --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "procs, classes, expected",
    [
        (1, 10, [([0], list(range(10)))]),
        (3, 10, [([0], [0, 1, 2, 3]), ([1], [4, 5, 6]), ([2], [7, 8, 9])]),
        (10, 10, [([r], [r]) for r in range(10)]),
        (4, 2, [([0, 1], [0]), ([2, 3], [1])]),
        (20, 10, [([2 * c, 2 * c + 1], [c]) for c in range(10)]),
        (2, 3, [([0], [0, 1]), ([1], [2])]),
    ],
)
def test_class_plan(procs, classes, expected):
    plan = class_plan(list(range(classes)), procs)
    assert plan == expected
    # every class exactly once, every rank exactly once, shares differ by at most one class
    assert sorted(c for _, cs in plan for c in cs) == list(range(classes))
    assert sorted(r for rs, _ in plan for r in rs) == list(range(procs))
    sizes = [len(cs) for _, cs in plan]
    assert max(sizes) - min(sizes) <= 1


def test_class_plan_keeps_class_labels():
    assert class_plan([3, 7], 4) == [([0, 1], [3]), ([2, 3], [7])]


def test_class_plan_rejects_uneven_groups():
    with pytest.raises(TrainingError, match="3 processes cannot be split evenly over 2 classes"):
        class_plan([0, 1], 3)


# --- losses -------------------------------------------------------------------------------------------------


class Linear(nn.Module):
    """critic(x) = <w, x>: its gradient is w everywhere."""

    def __init__(self, w):
        super().__init__()
        self.w = w

    def forward(self, x, labels=None):
        return (x.flatten(1) * self.w).sum(1)


class HalfSquare(nn.Module):
    """critic(x) = |x|^2 / 2: its gradient at x is x."""

    def forward(self, x, labels=None):
        return 0.5 * (x.flatten(1) ** 2).sum(1)


def test_gradient_penalty_of_a_linear_critic():
    real, fake = torch.randn(5, 1, 2, 2), torch.randn(5, 1, 2, 2)
    w = torch.tensor([3.0, 0.0, 4.0, 0.0])  # |w| = 5: penalty (5 - 1)^2 = 16 for every interpolate
    assert gradient_penalty(Linear(w), real, fake).item() == pytest.approx(16.0)
    assert gradient_penalty(Linear(torch.tensor([0.6, 0.8, 0.0, 0.0])), real, fake).item() == pytest.approx(0.0, abs=1e-12)


def test_gradient_penalty_by_hand_on_interpolates():
    real = torch.tensor([[[[1.0, 0.0], [0.0, 0.0]]], [[[0.0, 2.0], [0.0, 0.0]]]])
    fake = torch.zeros_like(real)
    eps = torch.rand(2, 1, 1, 1, generator=torch.Generator().manual_seed(5))
    # x_hat = eps * real; grad = x_hat; |x_hat| = eps * |real| = (eps0 * 1, eps1 * 2)
    expected = ((eps[0, 0, 0, 0] * 1 - 1) ** 2 + (eps[1, 0, 0, 0] * 2 - 1) ** 2) / 2
    got = gradient_penalty(HalfSquare(), real, fake, generator=torch.Generator().manual_seed(5))
    assert got.item() == pytest.approx(expected.item(), rel=1e-6)


def test_gradient_penalty_is_differentiable_for_the_critic():
    w = torch.tensor([3.0, 0.0, 4.0, 0.0], requires_grad=True)
    penalty = gradient_penalty(Linear(w), torch.randn(3, 1, 2, 2), torch.randn(3, 1, 2, 2))
    (grad,) = torch.autograd.grad(penalty, w)
    # d/dw (|w| - 1)^2 = 2 (|w| - 1) w / |w| = 2 * 4 * w / 5
    assert torch.allclose(grad, 1.6 * w.detach())


def test_losses_have_the_expected_signs():
    good, bad = torch.full((8,), 5.0), torch.full((8,), -5.0)
    for name in ("bce", "minimax", "mse", "heuristic"):
        loss = get_loss(name)
        assert loss.discriminator(good, bad) < loss.discriminator(bad, good), name
        assert loss.generator(good) < loss.generator(bad), name
    wgan = get_loss("wgan-gp")
    assert wgan.needs_penalty and wgan.discriminator(good, bad).item() == -10.0 and wgan.generator(good).item() == -5.0
    assert set(LOSS_OBJECTS) == {"bce", "heuristic", "minimax", "mse", "wgan-gp"}
    with pytest.raises(ValueError, match="unknown loss"):
        get_loss("hinge")


# --- per-class sampling -----------------------------------------------------------------------------------


def test_per_class_bundle_samples_each_class_from_its_own_generator():
    from suite.gan.models import build_pair

    generators = {f"class{c}": build_pair(20, 1, 8, seed=c)[0].state_dict() for c in (3, 7)}
    bundle = GeneratorBundle("per_class", 20, 1, 8, 10, False, generators, {3: 0.25, 7: 0.75}, classes={"class3": 3, "class7": 7})
    images, labels = Sampler(bundle).sample(400, seed=1)
    assert set(labels.tolist()) == {3, 7} and 0.65 < (labels == 7).float().mean() < 0.85  # drawn from the prior
    again, again_labels = Sampler(bundle).sample(400, seed=1)
    assert torch.equal(images, again) and torch.equal(labels, again_labels)
    # each image is its class generator's output for that sample's noise
    z = torch.randn(
        400, 8, generator=__import__("suite.gan.seeding", fromlist=["torch_generator"]).torch_generator(1, "sample-noise")
    )
    sampler = Sampler(bundle)
    with torch.no_grad():
        for c in (3, 7):
            rows = (labels == c).nonzero().flatten()[:5]
            assert torch.allclose(images[rows], sampler.networks[f"class{c}"](z[rows]), atol=1e-6)


def test_labelled_models_sample_by_class_in_class_order_and_have_a_digest():
    from suite.gan.models import build_pair

    generators = {f"class{c}": build_pair(20, 1, 8, seed=c)[0].state_dict() for c in (3, 7)}
    bundle = GeneratorBundle("per_class", 20, 1, 8, 10, False, generators, {3: 0.25, 7: 0.75}, classes={"class3": 3, "class7": 7})
    sampler = Sampler(bundle)
    images = sampler.sample_by_class(4, seed=0)
    assert images.shape == (8, 1, 20, 20)
    z = torch.randn(
        8, 8, generator=__import__("suite.gan.seeding", fromlist=["torch_generator"]).torch_generator(0, "sample-by-class")
    )
    with torch.no_grad():  # rows of class 3 first, then class 7, each from its own generator
        assert torch.allclose(images[:4], sampler.networks["class3"](z[:4]), atol=1e-6)
        assert torch.allclose(images[4:], sampler.networks["class7"](z[4:]), atol=1e-6)
    same = GeneratorBundle(
        "per_class",
        20,
        1,
        8,
        10,
        False,
        {k: {n: t.clone() for n, t in v.items()} for k, v in generators.items()},
        {3: 0.25, 7: 0.75},
        classes={"class3": 3, "class7": 7},
    )
    assert bundle.digest() == same.digest()
    same.generators["class7"]["input.0.bias"] += 1e-7
    assert bundle.digest() != same.digest()
    unconditional = GeneratorBundle("single", 20, 1, 8, 10, False, {"all": generators["class3"]}, {3: 1.0})
    assert not unconditional.labelled and bundle.labelled
    with pytest.raises(ValueError, match="only conditional and per-class models"):
        Sampler(unconditional).sample_by_class(2)


# --- real runs ------------------------------------------------------------------------------------------------


def partition(folder: Path, runs: list[dict]) -> tuple[int, dict, Path]:
    scenario = tiny_scenario(
        "partitioned",
        runs,
        dataset={"classes": [0, 1]},
        wgan_gp={"n_critic": 2},
        metrics={"enabled": True, "samples": 200, "curve_points": 2},
    )
    code, records = run_scenario(folder, scenario)
    return code, records, folder / "results"


@pytest.fixture(scope="module")
def partitioned(tmp_path_factory):
    """Classes 0 and 1 of digits on 2 and 4 Horovod processes (the W-CGAN)."""
    runs = [{"strategy": "label_partitioned", "engine": "horovod", "loss": "wgan-gp", "procs": [2, 4]}]
    return partition(tmp_path_factory.mktemp("partitioned"), runs)


@pytest.fixture(scope="module")
def partitioned_matrix(tmp_path_factory):
    """The same on MPI's and torch.distributed's communicators, with the DC-CGAN's loss (`make test-matrix`)."""
    runs = [{"strategy": "label_partitioned", "engine": e, "loss": "bce", "procs": [4]} for e in ("mpi", "torch")]
    return partition(tmp_path_factory.mktemp("partitioned-matrix"), runs)


@pytest.mark.multiproc
def test_as_many_ranks_as_classes_communicate_nothing(partitioned):
    _, records, _ = partitioned
    r = records["label_partitioned-wgan-gp-horovod-p2-r0"]
    assert r["status"] == "ok", r.get("error")
    assert [g["ranks"] for g in r["groups"]] == [[0], [1]] and [g["classes"] for g in r["groups"]] == [[0], [1]]
    assert r["comm"]["bytes"] == 0 and r["comm"]["per_rank_bytes"] == [0, 0] and r["comm"]["largest_group"] == 0
    assert r["classes"] == [0, 1]


@pytest.mark.multiproc
@pytest.mark.parametrize(
    "run_id",
    [
        "label_partitioned-wgan-gp-horovod-p4-r0",
        pytest.param("label_partitioned-bce-mpi-p4-r0", marks=pytest.mark.matrix),
        pytest.param("label_partitioned-bce-torch-p4-r0", marks=pytest.mark.matrix),
    ],
)
def test_more_ranks_than_classes_train_in_class_groups(request, run_id):
    _, records, _ = request.getfixturevalue("partitioned" if "-horovod-" in run_id else "partitioned_matrix")
    r = records[run_id]
    assert r["status"] == "ok", r.get("error")
    assert [g["ranks"] for g in r["groups"]] == [[0, 1], [2, 3]]
    # traffic only inside the groups: every rank sent bytes, through communicators of 2 ranks, never 4
    assert all(b > 0 for b in r["comm"]["per_rank_bytes"]) and r["comm"]["largest_group"] == 2
    # replicas agree inside a group; the two classes' GANs differ
    first, second = (g["digests"] for g in r["groups"])
    assert len(set(first)) == 1 and len(set(second)) == 1 and first[0] != second[0]
    assert r["replicas_identical"] is True


PER_CLASS_RUN = "label_partitioned-wgan-gp-horovod-p4-r0"
"""Two class groups of two ranks: each group's leader hands its generator to rank 0's bundle."""


@pytest.mark.multiproc
def test_per_class_generators_are_saved_scored_and_sampled(partitioned, tmp_path, capsys):
    from suite.cli import main

    code, records, results = partitioned
    assert code == 0
    run_dir = results / PER_CLASS_RUN
    assert not (run_dir / "partial").exists()  # the group leaders' files went into the bundle
    bundle = GeneratorBundle.load(run_dir / "generator.pt")
    assert bundle.kind == "per_class" and bundle.classes == {"class0": 0, "class1": 1}
    q = records[PER_CLASS_RUN]["quality"]
    assert q["per_class_predicted"] is None and set(q["per_class_label"]) == {"0", "1"}
    assert q["features"].startswith("classifier:") and q["n"] == 200 and q["label_acc"] is not None
    assert len(records[PER_CLASS_RUN]["curve"]) >= 1
    capsys.readouterr()
    assert main(["score", "--run", str(run_dir), "--n", "200", "--json"]) == 0  # dataset and classes from the record
    scored = json.loads(capsys.readouterr().out)
    assert scored["fid"] == pytest.approx(q["fid"]) and scored["n"] == 200  # same samples (seed 0) as the record's
    out = tmp_path / "s.npz"
    assert main(["sample", str(run_dir), "--n", "64", "--seed", "0", "--out", str(out)]) == 0
    with np.load(out) as npz:
        assert npz["images"].shape == (64, 1, 20, 20) and npz["images"].dtype == np.float32
        assert npz["labels"].dtype == np.int64 and set(npz["labels"].tolist()) <= {0, 1}
        assert -1 <= npz["images"].min() and npz["images"].max() <= 1


@pytest.mark.multiproc
def test_uneven_class_shares_finish_cleanly_with_horovod(tmp_path):
    # 3 classes on 2 ranks: rank 0 trains two GANs, rank 1 one, so rank 1 waits for rank 0 to finish.
    scenario = tiny_scenario(
        "uneven", [{"strategy": "label_partitioned", "engine": "horovod", "procs": [2]}], dataset={"classes": [0, 1, 2]}
    )
    code, records = run_scenario(tmp_path, scenario)
    r = records["label_partitioned-bce-horovod-p2-r0"]
    assert code == 0 and r["status"] == "ok", r.get("error")
    assert [g["classes"] for g in r["groups"]] == [[0, 1], [2]]
    assert r["generator_steps"] == {"0": 3, "1": 3, "2": 3} and r["comm"]["bytes"] == 0
