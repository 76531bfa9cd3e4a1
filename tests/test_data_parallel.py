"""Data-parallel training on real processes: replicas stay identical, and 2 ranks reproduce 1 rank.

With synchronised BatchNorm and no dropout, 2 ranks that each take half of every global batch
(and half of its noise) compute the same averaged gradients as 1 rank on the whole batch, so the
weights after N steps agree up to floating-point summation order.
"""

import pytest
import torch

from conftest import run_scenario, tiny_scenario

ENGINES = [("data_parallel", "horovod"), ("data_parallel", "torch"), ("conditional", "mpi"), ("data_parallel", "deepspeed")]


@pytest.fixture(scope="module")
def equivalence_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("equivalence")
    scenario = tiny_scenario(
        "equivalence",
        [{"strategy": s, "engine": e, "procs": [1, 2]} for s, e in ENGINES],
        model={"dropout": 0.0, "sync_batchnorm": True},
        train={"steps": 4},
    )
    code, records = run_scenario(tmp, scenario)
    return code, records, tmp / "results"


def generator_weights(results, run_id):
    return torch.load(results / run_id / "generator.pt", weights_only=False)["generators"]["all"]


@pytest.mark.multiproc
@pytest.mark.parametrize("strategy, engine", ENGINES)
def test_two_ranks_match_one_rank(equivalence_runs, strategy, engine):
    code, records, results = equivalence_runs
    one, two = f"{strategy}-bce-{engine}-p1-r0", f"{strategy}-bce-{engine}-p2-r0"
    assert records[one]["status"] == "ok", records[one].get("error")
    assert records[two]["status"] == "ok", records[two].get("error")
    assert records[two]["replicas_identical"] is True
    assert len(records[two]["replica_digests"]) == 2
    assert records[one]["generator_steps"] == records[two]["generator_steps"] == 4
    a, b = generator_weights(results, one), generator_weights(results, two)
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(b[key].float(), a[key].float(), atol=1e-5, rtol=1e-4, msg=key)
    # the 2-rank run communicated gradients (and BatchNorm statistics); the 1-rank run nothing
    assert records[one]["comm"]["bytes"] == 0 and records[two]["comm"]["bytes"] > 0
    assert code == 0


@pytest.mark.multiproc
def test_training_actually_changed_the_weights(equivalence_runs):
    from suite.models import build_pair
    from suite.seeding import derive_seed

    _, _, results = equivalence_runs
    trained = generator_weights(results, "data_parallel-bce-horovod-p1-r0")
    initial, _ = build_pair(16, 1, 100, dropout=0.0, seed=derive_seed(0, "init", "all"))
    assert not torch.allclose(trained["input.0.weight"], initial.input[0].weight)
