"""Free-form settings handed to an engine's own library, confined: ``runs[].deepspeed.config``.

DeepSpeed's config has keys that write files where they say, send the run to a service, crash this engine, or take
over what the suite sets itself; results folders are shared, so a scenario from someone else must not write anywhere
but its run folders. So the config is an allowlist (:data:`DEEPSPEED_KEYS`; docs/engine-settings.md), checked when
the scenario is validated (:func:`check_deepspeed_settings`) and again when a rank builds its config from ``run.json``
(:func:`confined_deepspeed_config`), every other key refused in one line naming it and why. The one key that writes
files, ``csv_monitor``, writes inside the run folder. The other engines have no free-form settings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from .shown import shown, shown_name

MAX_CONFIG_CHARS = 64 << 10
"""The most characters a ``deepspeed.config`` may take as JSON: every key it may set fits in a few hundred, and each
run's ``run.json`` and record carry it."""

MAX_NAMES = 256
"""The most names a list of the config holds (``comms_logger.prof_ops``)."""

MAX_NAME_CHARS = 200
"""The longest name in such a list (an operation's name)."""

DEEPSPEED_MONITOR_DIR = "deepspeed-monitor"
"""The folder under a run folder where DeepSpeed's CSV monitor writes, one subfolder per network."""


@dataclass(frozen=True)
class _Value:
    """What a config value must be: ``kind`` bool | int | number | text | texts (a list of strings), with bounds."""

    kind: str
    least: float | None = None  # the smallest value allowed (None: no bound)
    above: bool = False  # least is excluded
    choices: tuple[str, ...] = ()

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not one of these, or None."""
        if self.kind == "bool":
            return None if isinstance(value, bool) else "expected true or false"
        if self.kind == "texts":
            ok = isinstance(value, list) and all(isinstance(v, str) and 0 < len(v) <= MAX_NAME_CHARS for v in value)
            if ok and len(value) > MAX_NAMES:
                return f"at most {MAX_NAMES} names"
            return None if ok else f"expected a list of names (1 to {MAX_NAME_CHARS} characters each)"
        if self.kind == "text":
            if not isinstance(value, str) or (self.choices and value not in self.choices):
                return f"expected one of {', '.join(self.choices)}"
            return None
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not number or (self.kind == "int" and not isinstance(value, int)) or not math.isfinite(value):
            return "expected an integer" if self.kind == "int" else "expected a finite number"
        if self.least is not None and (value <= self.least if self.above else value < self.least):
            return f"must be {'greater than' if self.above else 'at least'} {self.least:g}"
        return None


_FLAG = _Value("bool")
_SIZE = _Value("int", least=1)

_ZERO = {
    "reduce_bucket_size": _SIZE,
    "allgather_bucket_size": _SIZE,
    "overlap_comm": _FLAG,
    "contiguous_gradients": _FLAG,
    "reduce_scatter": _FLAG,
    "allgather_partitions": _FLAG,
    "round_robin_gradients": _FLAG,
    "use_multi_rank_bucket_allreduce": _FLAG,
    "ignore_unused_parameters": _FLAG,
}
"""``zero_optimization`` keys a scenario may set (over the suite's ``stage``): how ZeRO buckets and overlaps."""

_COMMS_LOGGER = {"enabled": _FLAG, "verbose": _FLAG, "prof_all": _FLAG, "debug": _FLAG, "prof_ops": _Value("texts")}
"""``comms_logger`` keys: DeepSpeed's communication logger prints; ``suite run --trace`` writes its summary."""

_CSV_MONITOR = {"enabled": _FLAG}
"""``csv_monitor`` keys a scenario may set; the suite sets ``output_path`` and ``job_name`` (inside the run folder)."""

DEEPSPEED_KEYS: dict[str, _Value | dict[str, _Value]] = {
    "zero_optimization": _ZERO,
    "gradient_clipping": _Value("number", least=0),
    "prescale_gradients": _FLAG,
    "gradient_predivide_factor": _Value("number", least=0, above=True),
    "communication_data_type": _Value("text", choices=("fp32", "fp16", "bf16")),
    "sparse_gradients": _FLAG,
    "disable_allgather": _FLAG,
    "zero_allow_untested_optimizer": _FLAG,
    "wall_clock_breakdown": _FLAG,
    "memory_breakdown": _FLAG,
    "dump_state": _FLAG,
    "steps_per_print": _SIZE,
    "comms_logger": _COMMS_LOGGER,
    "csv_monitor": _CSV_MONITOR,
}
"""The keys of ``deepspeed.config`` that the suite hands on, each with what its value must be (a section: its keys)."""

_SUITE_SETS_IT = "the suite sets it"
_PRECISION = "precision is the suite's performance.bf16 setting (docs/gpu.md), the same on every engine"
_REASONS = {
    "train_batch_size": f"{_SUITE_SETS_IT} from train.batch_size and the ranks",
    "train_micro_batch_size_per_gpu": f"{_SUITE_SETS_IT} from train.batch_size and the ranks",
    "gradient_accumulation_steps": f"{_SUITE_SETS_IT}: one optimizer step per batch",
    "optimizer": "the run's own Adam is DeepSpeed's optimizer (train.lr, train.betas)",
    "scheduler": "the run's learning rate is train.lr",
    "fp16": _PRECISION,
    "bf16": _PRECISION,
    "amp": _PRECISION,
    "torch_autocast": _PRECISION,
    "flops_profiler": "it crashes this engine (AssertionError: bwd_microstep timer); suite run --trace profiles every run",
    "tensorboard": "it writes where its output_path says; the suite writes TensorBoard events itself (logs.tensorboard, "
    "suite run --tensorboard DIR)",
    "wandb": "it sends the run to Weights & Biases and writes ./wandb outside the run folder",
    "comet": "it sends the run to Comet",
    "autotuning": "it writes its experiments where its paths say and launches runs of its own",
    "elasticity": "it changes the batch size the suite sets",
    "aio": "it serves NVMe swap files, written where zero_optimization's nvme_path says",
    "nebula": "it writes checkpoints where its persistent_storage_path says",
    "checkpoint": "the suite saves its own checkpoints (train.checkpoint_every)",
    "data_efficiency": "it reads data from paths of its own",
    "curriculum_learning": "it reads data from paths of its own",
    "compression_training": "it changes the networks being measured",
    "zero_optimization.stage": "use deepspeed.zero_stage",
    "zero_optimization.offload_optimizer": "ZeRO-Offload moves optimizer state to the CPU or to NVMe files",
    "zero_optimization.offload_param": "ZeRO-Offload moves parameters to the CPU or to NVMe files",
    "csv_monitor.output_path": f"{_SUITE_SETS_IT}: the CSV files go to RUN_DIR/{DEEPSPEED_MONITOR_DIR}/<network>",
    "csv_monitor.job_name": f"{_SUITE_SETS_IT}: the CSV files go to RUN_DIR/{DEEPSPEED_MONITOR_DIR}/<network>",
}
"""Why a key is refused, where a reason is known (every key not in :data:`DEEPSPEED_KEYS` is refused)."""


def deepspeed_config_problem(config: Any) -> tuple[str, str] | None:
    """The first key of a ``deepspeed.config`` that is refused, as (dotted key, why), or None when every key is handed on."""
    if config is None:
        return None
    if not isinstance(config, dict):
        return "", f"expected a mapping of DeepSpeed config keys, got {shown(config)}"
    size = _json_size(config, MAX_CONFIG_CHARS)
    if size > MAX_CONFIG_CHARS:
        return "", f"more than {MAX_CONFIG_CHARS:,} characters as JSON; its keys need a few hundred"
    for key, value in config.items():
        rule = DEEPSPEED_KEYS.get(key) if isinstance(key, str) else None
        if rule is None:
            reason = _REASONS.get(key, "") if isinstance(key, str) else ""
            offered = f"the suite hands DeepSpeed only {', '.join(DEEPSPEED_KEYS)}"
            return shown_name(key), f"refused: {reason}; {offered}" if reason else f"refused: {offered}"
        if isinstance(rule, _Value):
            if (problem := rule.problem(value)) is not None:
                return key, f"{problem}, got {shown(value)}"
            continue
        if not isinstance(value, dict):
            return key, f"expected a mapping of {', '.join(rule)}, got {shown(value)}"
        for name, inner in value.items():
            where = f"{key}.{shown_name(name)}"
            sub = rule.get(name) if isinstance(name, str) else None
            if sub is None:
                known = _REASONS.get(where)
                return where, f"refused: {known}" if known else f"refused: {key} takes only {', '.join(rule)} here"
            if (problem := sub.problem(inner)) is not None:
                return where, f"{problem}, got {shown(inner)}"
    return None


def _json_size(value: Any, limit: int) -> int:
    """About how many characters ``value`` takes as JSON, counted until past ``limit`` (never built whole)."""
    total, stack = 0, [value]
    while stack and total <= limit:
        item = stack.pop()
        if isinstance(item, dict):
            total += 2 + sum(len(str(k)) + 4 for k in item)
            stack.extend(item.values())
        elif isinstance(item, list):
            total += 2 + len(item)
            stack.extend(item)
        else:
            total += len(str(item)) + 2
    return total


def check_deepspeed_settings(section: Any, path: str, fail: Callable[[str, str], Any]) -> None:
    """The deepspeed engine's ``check_settings`` trait: ``fail(path.config.KEY, why)`` for the first refused key of
    ``section.config`` (:func:`deepspeed_config_problem`)."""
    problem = deepspeed_config_problem(getattr(section, "config", None))
    if problem is not None:
        key, why = problem
        fail(f"{path}.config.{key}" if key else f"{path}.config", why)


def confined_deepspeed_config(config: dict[str, Any] | None, monitor_dir: str, network: str) -> dict[str, Any]:
    """A run's ``deepspeed.config`` as handed to DeepSpeed for one network: checked again (a rank reads it from
    ``run.json``; :class:`ValueError` naming the key), its CSV monitor writing into ``monitor_dir/network``
    (``monitor_dir``: the run folder's :data:`DEEPSPEED_MONITOR_DIR`)."""
    problem = deepspeed_config_problem(config)
    if problem is not None:
        key, why = problem
        raise ValueError(f"deepspeed.config.{key}: {why}" if key else f"deepspeed.config: {why}")
    confined = dict(config or {})
    if "csv_monitor" in confined:
        confined["csv_monitor"] = {**confined["csv_monitor"], "output_path": monitor_dir, "job_name": network}
    return confined
