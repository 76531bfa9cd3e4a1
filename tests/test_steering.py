"""No system trains on the judge: the steering network (what a strategy uses inside training) is never the ruler."""

import dataclasses
import json
import shutil

import numpy as np
import pytest
import torch
import yaml

from conftest import tiny_scenario
from suite.cli import main
from suite.config.expansion import expand, parse_scenario
from suite.gan.data import load_dataset
from suite.gan.models import build_pair
from suite.measure.metrics.features import ClassifierNet, steering_net
from suite.measure.metrics.rulers import (
    PACKAGED_RULERS,
    RulerError,
    find_classifier,
    find_steering,
    read_manifest,
    sha256_file,
)


def test_the_digits_steering_network_ships_pinned_and_is_another_network_than_the_ruler(isolated_cache):
    manifest = json.loads((PACKAGED_RULERS / "rulers.json").read_text())
    ruler, steering = manifest["classifier:digits"], manifest["steering:digits"]
    assert (ruler["role"], steering["role"]) == ("ruler", "steering")
    assert sha256_file(PACKAGED_RULERS / steering["file"]) == steering["sha256"] != ruler["sha256"]
    # another half of the training split and another seed; its held-out accuracy is measured on the test split
    assert (steering["train_rows"], steering["seed"], steering["train_images"]) == ("odd", 1, 718)
    assert ruler["train_rows"] == "all" and ruler["seed"] == 0
    assert "--steering --half odd" in steering["made_with"]
    assert (PACKAGED_RULERS / steering["file"]).stat().st_size < 2_000_000  # as small as the ruler

    judge, steer = ClassifierNet("digits"), steering_net("digits")
    assert (judge.name, steer.name) == ("classifier:digits", "steering:digits")
    assert (judge.sha256, steer.sha256) == (ruler["sha256"], steering["sha256"])
    test = load_dataset("digits", 20, "test")
    images = test.images[:200]
    judged, steered = judge.logits(images).numpy(), steer.logits(images).numpy()
    assert not np.allclose(judged, steered)  # two networks, not one under two names
    assert (steered.argmax(1) == test.labels[:200]).mean() > 0.9  # and a classifier in its own right


def _manifest(folder, entries):
    folder.mkdir(exist_ok=True)
    (folder / "rulers.json").write_text(json.dumps(entries))


def test_the_ruler_never_steers_and_a_steering_network_never_rules(tmp_path, monkeypatch):
    pinned = json.loads((PACKAGED_RULERS / "rulers.json").read_text())
    ruler = pinned["classifier:digits"]
    folder = tmp_path / "rulers"
    monkeypatch.setenv("SUITE_RULERS", str(folder))
    # the ruler's file pinned as mnist's steering network: refused, naming the field that asked for it
    _manifest(folder, {"steering:mnist": {**ruler, "name": "steering:mnist", "role": "steering"}})
    shutil.copy(PACKAGED_RULERS / ruler["file"], folder / ruler["file"])
    with pytest.raises(RulerError) as error:
        find_steering("mnist", "cellular.mixture_features")
    message = str(error.value)
    assert "\n" not in message and message.startswith("cellular.mixture_features: steering:mnist")
    assert "sha256 of the ruler classifier:digits" in message
    # a steering entry cannot be pinned under a ruler's name, nor a ruler under a steering name
    _manifest(folder, {"classifier:mnist": {**pinned["steering:digits"], "name": "classifier:mnist"}})
    with pytest.raises(RulerError, match="classifier:mnist has role 'steering'"):
        read_manifest(folder)
    _manifest(folder, {"steering:mnist": {**ruler, "name": "steering:mnist"}})
    with pytest.raises(RulerError, match="steering:mnist has role 'ruler'"):
        read_manifest(folder)
    assert find_classifier("digits")[0].sha256 == ruler["sha256"]  # the packaged ruler is found first, as before
    # a dataset with no steering network pinned: one line saying how to make one, never the ruler instead
    _manifest(folder, {})
    with pytest.raises(RulerError) as error:
        steering_net("mnist", field="runs[0].cellular.mixture_features")
    message = str(error.value)
    assert message.startswith("runs[0].cellular.mixture_features: no pinned steering network steering:mnist")
    assert "suite ruler train --dataset mnist --steering" in message


def test_a_manifest_written_before_roles_holds_rulers(tmp_path):
    entry = json.loads((PACKAGED_RULERS / "rulers.json").read_text())["classifier:digits"]
    del entry["role"], entry["train_rows"]
    _manifest(tmp_path, {"classifier:digits": entry})
    (loaded,) = read_manifest(tmp_path).values()
    assert (loaded.role, loaded.train_rows) == ("ruler", "all")


@pytest.mark.slow
def test_suite_ruler_train_makes_a_steering_network_on_half_the_split(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SUITE_RULERS", str(tmp_path / "rulers"))
    assert (
        main(["ruler", "train", "--dataset", "digits", "--image-size", "12", "--steering", "--half", "even", "--seed", "3"]) == 0
    )
    out = capsys.readouterr().out
    assert out.startswith(f"steering:digits  {tmp_path / 'rulers' / 'steering-digits.pt'}  (steering)")
    entry = json.loads((tmp_path / "rulers" / "rulers.json").read_text())["steering:digits"]
    assert (entry["role"], entry["train_rows"], entry["seed"], entry["image_size"]) == ("steering", "even", 3, 12)
    assert entry["train_images"] == 719 and entry["heldout_split"] == "test"  # the even rows of the 1,437
    assert entry["sha256"] == out.split("sha256 ")[1].split()[0] == sha256_file(tmp_path / "rulers" / "steering-digits.pt")
    assert main(["ruler", "list"]) == 0
    listing = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert [(line[0], line[1], line[-1]) for line in listing if line[0] == "steering:digits"] == [
        ("steering:digits", "steering", "ok"),
        ("steering:digits", "steering", "ok"),  # the packaged one first: it is the one found
    ]


def _cellular_run(**cellular):
    scenario = tiny_scenario(
        "steer",
        [{"strategy": "cellular", "engine": "mpi", "grid": [1, 2], "procs": [1]}],
        cellular={"mixture_samples": 150, **cellular},
    )
    return expand(parse_scenario(scenario))[0]


@pytest.mark.parametrize("space, dim", [("logits", 10), ("features", 128)])
def test_cellular_mixtures_are_scored_by_the_steering_network_and_never_load_the_ruler(monkeypatch, space, dim):
    import suite.measure.metrics.features as features
    from suite.measure.metrics import Reference
    from suite.train.strategies.cellular.algorithm import MixtureScorer

    def no_ruler(dataset):
        raise AssertionError(f"the mixture scorer loaded the ruler of {dataset}")

    monkeypatch.setattr(features, "find_classifier", no_ruler)
    run = _cellular_run(mixture_features=space)
    scorer = MixtureScorer(run, torch.device("cpu"), Reference.for_run(run, "cpu"))
    steering = json.loads((PACKAGED_RULERS / "rulers.json").read_text())["steering:digits"]
    assert scorer.net.sha256 == steering["sha256"] and scorer.dim == dim
    assert scorer.name == ("steering:digits/logits" if space == "logits" else "steering:digits")
    assert dataclasses.asdict(scorer.steering) == {
        "name": "steering:digits",
        "sha256": steering["sha256"],
        "use": f"cellular mixture weights ({space})",
    }
    # and its score is an FID in that network's space: a generator's samples score finite and positive
    generator = build_pair(20, 1, run.model.latent_dim, seed=0, architecture=run.model.architecture)[0]
    assert 0 < scorer([generator], np.ones(1), 0) < float("inf")


def test_a_run_whose_strategy_steers_stops_before_training_without_a_steering_network(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SUITE_RULERS", str(tmp_path / "no-rulers"))
    raw = tmp_path / "data" / "MNIST" / "raw"  # the data is there (its names: nothing reads them before the check)
    raw.mkdir(parents=True)
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        (raw / name).write_bytes(b"")
    monkeypatch.setenv("SUITE_DATA", str(tmp_path / "data"))
    path = tmp_path / "s.yaml"
    data = tiny_scenario("s", [{"strategy": "cellular", "engine": "mpi", "grid": [1, 2], "procs": [1]}])
    data["dataset"] = {**data.get("dataset", {}), "name": "mnist", "image_size": 20}
    data["metrics"] = {"enabled": False}  # nothing scored: only the steering network is needed, and it is not there
    path.write_text(yaml.safe_dump(data))
    assert main(["run", str(path), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("error: cellular.mixture_features: no pinned steering network steering:mnist")
    assert "suite ruler train --dataset mnist --steering" in err and not (tmp_path / "r").exists()
