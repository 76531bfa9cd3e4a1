"""No system trains on the judge: the steering network (what a strategy uses inside training) is never the ruler."""

import dataclasses
import json
import shutil
from pathlib import Path

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

STEERING_SHA256 = "9042f1f4e0596be4e06ceb1178ba37c3da3174acd89083ce6b5c7e6abbc83948"
"""The shipped digits steering network's sha256 (``ci/train_steering.py``): a file made again changes it here too."""


def test_the_digits_steering_network_ships_pinned_and_is_another_network_than_the_ruler(isolated_cache):
    from suite.measure.metrics.features import PixelMLP, SmallCNN

    manifest = json.loads((PACKAGED_RULERS / "rulers.json").read_text())
    ruler, steering = manifest["classifier:digits"], manifest["steering:digits"]
    assert (ruler["role"], steering["role"]) == ("ruler", "steering")
    assert sha256_file(PACKAGED_RULERS / steering["file"]) == steering["sha256"] == STEERING_SHA256 != ruler["sha256"]
    # another architecture: a perceptron on the raw 8x8 pixels, not the ruler's CNN at 20x20
    assert (ruler["architecture"], steering["architecture"]) == ("small-cnn", "pixel-mlp")
    assert (ruler["image_size"], steering["image_size"]) == (20, 8)
    # on data the ruler was not trained on: the even rows of the test split (the ruler: the whole training split)
    assert (steering["train_split"], steering["train_rows"], steering["train_images"]) == ("test", "even", 180)
    assert (ruler["train_split"], ruler["train_rows"]) == ("train", "all")
    assert "which the ruler was not trained on" in steering["trained_on"] and "--steering" in steering["made_with"]
    assert steering["measured_against"] == ruler["sha256"]
    assert (PACKAGED_RULERS / steering["file"]).stat().st_size < 500_000

    judge, steer = ClassifierNet("digits"), steering_net("digits")
    assert (judge.name, steer.name) == ("classifier:digits", "steering:digits")
    assert (judge.sha256, steer.sha256) == (ruler["sha256"], steering["sha256"])
    assert isinstance(judge.net, SmallCNN) and isinstance(steer.net, PixelMLP)
    assert not any(isinstance(m, torch.nn.Conv2d) for m in steer.net.modules())
    test = load_dataset("digits", 20, "test")
    images = test.images[:200]
    judged, steered = judge.logits(images).numpy(), steer.logits(images).numpy()
    assert not np.allclose(judged, steered)  # two networks, not one under two names
    odd = np.arange(1, len(test), 2)  # the rows neither was trained on
    assert (steer.logits(test.images[odd]).numpy().argmax(1) == test.labels[odd]).mean() > 0.85  # a classifier in its own right


def _page_number(label):
    """A number of the shipped network's row in ``reports/steering/steering.md``, by its column's label."""
    page = (Path(__file__).resolve().parents[1] / "reports" / "steering" / "steering.md").read_text()
    lines = [line for line in page.splitlines() if line.startswith("|")]
    at = next(i for i, line in enumerate(lines) if "top-1 agreement" in line)
    header = lines[at]
    row = next(line for line in lines[at:] if line.startswith("| `steering:digits`"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    return float([c.strip() for c in row.strip("|").split("|")][columns.index(label)])


def test_the_top1_agreement_is_measured_again_and_is_what_the_page_and_the_record_say(isolated_cache):
    from suite.measure.metrics.features import steering_record

    steering = json.loads((PACKAGED_RULERS / "rulers.json").read_text())["steering:digits"]
    judge, steer = ClassifierNet("digits"), steering_net("digits")
    test = load_dataset("digits", 20, "test")
    odd = np.arange(1, len(test), 2)
    images = test.images[odd]
    agreement = float((judge.logits(images).argmax(1) == steer.logits(images).argmax(1)).double().mean())
    assert round(agreement, 4) == steering["agreement_top1"] == _page_number("top-1 agreement")
    assert steering["rank_correlation_logits"] == _page_number("rank correlation (logits)")
    assert steering["rank_correlation_features"] == _page_number("rank correlation (features)")
    assert 0.5 < agreement < 1 and steering["rank_correlation_logits"] < 1  # measured, and not the judge's twin
    # the record's provenance: the space it steered in picks its rank correlation
    for space, key in (("logits", "rank_correlation_logits"), ("features", "rank_correlation_features")):
        named = steering_record(steer, f"cellular mixture weights ({space})", space)
        assert (named.architecture, named.trained_on) == ("pixel-mlp", steering["trained_on"])
        assert (named.agreement_top1, named.rank_correlation) == (steering["agreement_top1"], steering[key])
        assert named.measured_against == judge.sha256


@pytest.mark.slow
def test_the_rank_correlation_is_measured_again_from_the_pinned_files(isolated_cache):
    from suite.measure.metrics.steering import measure_agreement

    steering = json.loads((PACKAGED_RULERS / "rulers.json").read_text())["steering:digits"]
    measured = measure_agreement(ClassifierNet("digits"), steering_net("digits"), "digits", 20)
    assert round(measured.top1, 4) == steering["agreement_top1"]
    assert round(measured.rank_correlation_logits, 4) == steering["rank_correlation_logits"]
    assert round(measured.rank_correlation_features, 4) == steering["rank_correlation_features"]


def test_the_steering_provenance_reaches_the_record_and_older_records_still_load():
    from test_report import record

    from suite.records.codec import parse_record, record_data
    from suite.records.results import new_record

    provenance = {"architecture": "pixel-mlp", "trained_on": "the even rows", "agreement_top1": 0.9, "rank_correlation": 0.95}
    base = {"name": "steering:digits", "sha256": "ab" * 32, "use": "cellular mixture weights (logits)"}
    data = record("c", strategy="cellular", engine="mpi", steering={**base, **provenance, "measured_against": "cd" * 32})
    loaded = parse_record(record_data(new_record(data)))
    assert loaded.steering.agreement_top1 == 0.9
    assert record_data(loaded)["steering"]["rank_correlation"] == 0.95
    old = parse_record(record_data(new_record(record("c", strategy="cellular", engine="mpi", steering=base))))
    assert old.steering.name == "steering:digits" and old.steering.architecture is None


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
    del entry["role"], entry["train_rows"], entry["architecture"]
    _manifest(tmp_path, {"classifier:digits": entry})
    (loaded,) = read_manifest(tmp_path).values()
    assert (loaded.role, loaded.train_rows, loaded.architecture) == ("ruler", "all", "small-cnn")
    assert loaded.agreement_top1 is None


def test_a_steering_network_of_the_rulers_architecture_is_refused(tmp_path, monkeypatch):
    """The judge's twin (the ruler's CNN trained on other data, as steering networks were made before) never steers."""
    pinned = json.loads((PACKAGED_RULERS / "rulers.json").read_text())
    folder = tmp_path / "rulers"
    monkeypatch.setenv("SUITE_RULERS", str(folder))
    twin = {**pinned["steering:digits"], "name": "steering:mnist", "dataset": "mnist", "architecture": "small-cnn"}
    ruler = {**pinned["classifier:digits"], "name": "classifier:mnist", "dataset": "mnist"}
    _manifest(folder, {"steering:mnist": twin, "classifier:mnist": ruler})
    with pytest.raises(RulerError) as error:
        find_steering("mnist", "cellular.mixture_features")
    message = str(error.value)
    assert "\n" not in message and message.startswith("cellular.mixture_features: steering:mnist")
    assert "small-cnn, the architecture of the ruler classifier:mnist" in message
    assert "suite ruler train --dataset mnist --steering" in message


@pytest.mark.slow
def test_suite_ruler_train_makes_a_steering_network_on_half_the_test_split(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SUITE_RULERS", str(tmp_path / "rulers"))
    monkeypatch.setattr("suite.measure.metrics.steering.IMAGES_SHOWN", 2_000)  # the route, not the network
    assert main(["ruler", "train", "--dataset", "digits", "--image-size", "12", "--steering", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"steering:digits  {tmp_path / 'rulers' / 'steering-digits.pt'}  (steering)")
    assert "agreement with the ruler: top-1 " in out
    entry = json.loads((tmp_path / "rulers" / "rulers.json").read_text())["steering:digits"]
    assert (entry["role"], entry["train_rows"], entry["seed"], entry["image_size"]) == ("steering", "even", 3, 8)
    assert (entry["architecture"], entry["train_split"], entry["train_images"]) == ("pixel-mlp", "test", 180)
    assert entry["heldout_split"] == "test" and entry["heldout_images"] == 180  # the odd rows: neither network saw them
    assert entry["measured_against"] == find_classifier("digits")[0].sha256
    assert 0 <= entry["agreement_top1"] <= 1 and -1 <= entry["rank_correlation_logits"] <= 1
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
    import suite.measure.metrics.classifier as classifier
    from suite.measure.metrics.reference import Reference
    from suite.strategies.cellular.algorithm import MixtureScorer

    def no_ruler(dataset):
        raise AssertionError(f"the mixture scorer loaded the ruler of {dataset}")

    monkeypatch.setattr(classifier, "find_classifier", no_ruler)
    run = _cellular_run(mixture_features=space)
    scorer = MixtureScorer(run, torch.device("cpu"), Reference.for_run(run, "cpu"))
    steering = json.loads((PACKAGED_RULERS / "rulers.json").read_text())["steering:digits"]
    assert scorer.net.sha256 == steering["sha256"] and scorer.dim == dim
    assert scorer.name == ("steering:digits/logits" if space == "logits" else "steering:digits")
    assert dataclasses.asdict(scorer.steering) == {
        "name": "steering:digits",
        "sha256": steering["sha256"],
        "use": f"cellular mixture weights ({space})",
        "architecture": "pixel-mlp",
        "trained_on": steering["trained_on"],
        "agreement_top1": steering["agreement_top1"],
        "rank_correlation": steering[f"rank_correlation_{space}"],
        "measured_against": steering["measured_against"],
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
