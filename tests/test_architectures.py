"""The architecture registry (``model.architecture``): Lipizzaner's perceptrons beside the DC-GAN networks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import run_scenario, tiny_scenario
from suite.config.expansion import expand, parse_scenario
from suite.config.registry import ARCHITECTURES
from suite.config.scenario import ScenarioError
from suite.gan.mlp import MLPDiscriminator, MLPGenerator
from suite.gan.models import Generator, build_pair


def test_mlp_pair_has_table_1_layers():
    g, d = build_pair(28, 1, 64, architecture="mlp")
    linears = [m for m in g.modules() if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(64, 256), (256, 256), (256, 784)]
    assert [type(m).__name__ for m in g.modules() if not isinstance(m, (torch.nn.Linear, torch.nn.Sequential, MLPGenerator))] == [
        "Tanh",
        "Tanh",
        "Tanh",
    ]
    heads = [(m.in_features, m.out_features) for m in d.modules() if isinstance(m, torch.nn.Linear)]
    assert heads == [(784, 256), (256, 256), (256, 1)]
    images = g(torch.randn(5, 64))
    assert images.shape == (5, 1, 28, 28) and images.abs().max() <= 1
    assert d(images).shape == (5,)


def test_mlp_outputs_follow_the_image_size_and_labels_condition_both_networks():
    g, d = build_pair(8, 1, 64, num_classes=10, architecture="mlp")
    assert isinstance(g, MLPGenerator) and isinstance(d, MLPDiscriminator)
    labels = torch.tensor([0, 3, 9])
    images = g(torch.randn(3, 64), labels)
    assert images.shape == (3, 1, 8, 8)
    assert not torch.equal(d(images, labels), d(images, torch.tensor([1, 1, 1])))
    with pytest.raises(ValueError, match="needs the labels"):
        g(torch.randn(3, 64))


def test_build_pair_is_a_function_of_the_seed_and_leaves_the_global_state():
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    a, b = build_pair(8, 1, 64, seed=7, architecture="mlp")[0], build_pair(8, 1, 64, seed=7, architecture="mlp")[0]
    assert torch.equal(torch.random.get_rng_state(), before)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    c = build_pair(8, 1, 64, seed=8, architecture="mlp")[0]
    assert not torch.equal(a.state_dict()["output.0.weight"], c.state_dict()["output.0.weight"])
    assert isinstance(build_pair(20, 1, 100)[0], Generator)  # dcgan stays the default


def _scenario(**model) -> dict:
    return tiny_scenario("arch", [{"strategy": "data_parallel", "engine": "torch"}], model=model)


def test_every_run_of_a_scenario_builds_the_one_architecture():
    scenario = _scenario(architecture="mlp", latent_dim=64)
    scenario["dataset"] = {"name": "digits", "image_size": 8}
    scenario["runs"] += [{"strategy": "label_partitioned", "engine": "mpi", "procs": [2]}]
    runs = expand(parse_scenario(scenario))
    assert {r.model.architecture for r in runs} == {"mlp"} and {r.critic_norm for r in runs} == {"none"}


def test_architecture_errors_name_the_field():
    with pytest.raises(ScenarioError, match=r"model.architecture: 'resnet' is not one of 'dcgan', 'mlp'"):
        parse_scenario(_scenario(architecture="resnet"))
    small = _scenario()
    small["dataset"] = {"name": "digits", "image_size": 8}
    with pytest.raises(ScenarioError, match=r"dataset.image_size: image_size 8 is not supported.*\(model.architecture dcgan\)"):
        parse_scenario(small)
    with pytest.raises(ScenarioError, match=r"model.critic_norm: 'layer' is not offered by the mlp architecture"):
        parse_scenario(_scenario(architecture="mlp", critic_norm="layer"))
    assert ARCHITECTURES["mlp"].critic_norms == () and "layer" in ARCHITECTURES["dcgan"].critic_norms


def test_native_resolution_keeps_the_files_size():
    scenario = _scenario(architecture="mlp")
    scenario["dataset"] = {"name": "digits", "resolution": "native"}
    assert parse_scenario(scenario).dataset.image_size == 8
    scenario["dataset"]["image_size"] = 20
    with pytest.raises(ScenarioError, match=r"dataset.image_size: 20 is not digits's original 8px"):
        parse_scenario(scenario)
    scenario["dataset"] = {"name": "imagenet", "resolution": "native"}
    with pytest.raises(ScenarioError, match=r"dataset.resolution: imagenet images have no one original size"):
        parse_scenario(scenario)


@pytest.mark.multiproc
def test_mlp_networks_train_in_a_cellular_run(tmp_path):
    """Lipizzaner's MLPs on a 2x2 grid over two ranks, on the 8x8 digits (64 outputs), scored and sampled."""
    from suite.cli import main

    scenario = tiny_scenario(
        "mlp-cellular",
        [{"strategy": "cellular", "engine": "mpi", "grid": [2, 2], "procs": [2], "loss": "bce"}],
        dataset={"image_size": 8},
        model={"architecture": "mlp", "latent_dim": 64},
        train={"batch_size": 16, "threads": 1},
        cellular={"iterations": 2, "batches_per_iteration": 2, "mixture_samples": 40, "fitness_samples": 40},
        metrics={"enabled": True, "samples": 100, "features": "classifier"},
    )
    code, records = run_scenario(tmp_path, scenario)
    record = records["cellular-bce-mpi-p2-g2x2-r0"]
    assert code == 0 and record["status"] == "ok", record.get("error")
    assert record["architecture"] == "mlp" and record["dataset"]["image_size"] == 8
    out = tmp_path / "samples.npz"
    assert main(["sample", str(tmp_path / "results" / record["run_id"]), "--n", "16", "--out", str(out)]) == 0
    with np.load(out) as npz:
        assert npz["images"].shape == (16, 1, 8, 8)
