"""Scoring a finished run: what is sampled, and that nothing is scored twice."""

import dataclasses

import pytest
import torch

from conftest import tiny_scenario
from suite.config.expansion import expand, parse_scenario
from suite.gan.models import build_pair
from suite.gan.sampling import GeneratorBundle, Sampler
from suite.gan.seeding import torch_generator
from suite.measure import metrics
from suite.running import worker
from suite.train.strategies.base import Outcome

PRIOR = {c: 0.1 for c in range(10)}


def bundle(seed: int, conditional: bool = True) -> GeneratorBundle:
    generator, _ = build_pair(20, 1, 100, num_classes=10 if conditional else 0, seed=seed)
    return GeneratorBundle("single", 20, 1, 100, 10, conditional, {"all": generator.state_dict()}, dict(PRIOR))


def copy_of(original: GeneratorBundle, **changes) -> GeneratorBundle:
    tensors = {key: {name: t.clone() for name, t in state.items()} for key, state in original.generators.items()}
    return dataclasses.replace(original, generators=tensors, **changes)


@pytest.mark.parametrize("conditional", [True, False])
def test_the_sampler_draws_what_the_generator_makes_in_any_batch_size(conditional):
    model = bundle(3, conditional)
    sampler = Sampler(model)
    images, labels = sampler.sample(230, seed=1)
    again, _ = sampler.sample(230, seed=1, batch_size=230)
    torch.testing.assert_close(images, again, rtol=0, atol=1e-6)  # batching is not part of the model
    generator, _ = build_pair(20, 1, 100, num_classes=10 if conditional else 0, seed=3)
    generator.eval()
    z = torch.randn(230, 100, generator=torch_generator(1, "sample-noise"))
    with torch.no_grad():
        expected = generator(z, labels if conditional else None)
    torch.testing.assert_close(images, expected, rtol=0, atol=1e-6)
    assert (labels >= 0).all() if conditional else (labels == -1).all()


def test_a_snapshot_identical_to_the_final_model_is_scored_once(monkeypatch):
    run = expand(
        parse_scenario(
            tiny_scenario(
                "s",
                [{"strategy": "conditional", "procs": [1]}],
                metrics={"enabled": True, "features": "classifier", "samples": 200, "curve_points": 3},
            )
        )
    )[0]
    scored = []
    evaluate = metrics.evaluate_sampler

    def counted(sampler, *args, **kwargs):
        scored.append(sampler.bundle)
        return evaluate(sampler, *args, **kwargs)

    monkeypatch.setattr(metrics, "evaluate_sampler", counted)
    final, earlier = bundle(0), bundle(1)
    other_prior = copy_of(final, class_prior={**PRIOR, 0: 0.3})  # the same tensors, other samples
    curve = [(1.0, 2, 64, earlier), (1.5, 3, 96, other_prior), (2.0, 4, 128, copy_of(final))]
    fields = worker._score(run, Outcome(final, curve=curve), torch.device("cpu"), 2.0, 4, 128)
    assert [id(b) for b in scored] == [id(final), id(earlier), id(other_prior)]  # the last snapshot is the final model
    last = fields["curve"][-1]
    assert last["step"] == 4 and len(fields["curve"]) == 3
    assert (last["fid"], last["kid_mean"], last["is_mean"]) == tuple(fields["quality"][k] for k in ("fid", "kid_mean", "is_mean"))
    assert fields["curve"][0]["fid"] != last["fid"]
