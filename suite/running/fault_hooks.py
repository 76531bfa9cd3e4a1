"""Test hooks of the worker (:mod:`suite.running.worker`): fail, slow down or diverge a rank at a known step.

``SUITE_TEST_FAIL_AT_STEP``, ``SUITE_TEST_FAIL_RANK``, ``SUITE_TEST_FAIL_HOW``, ``SUITE_TEST_FAIL_RUN``,
``SUITE_TEST_DIVERGE_AT_STEP`` (the tests') and ``SUITE_TEST_SLOWDOWN`` (``suite gate --inject-slowdown``, to measure
the gate's detection rate): :data:`suite.config.envsettings.SETTINGS` and docs/reliability.md say what each does.
"""

from __future__ import annotations

import os
import signal
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..measure.telemetry import Telemetry


def fail_at_step(telemetry: Telemetry, rank: int, run_id: str) -> None:
    """Rank ``SUITE_TEST_FAIL_RANK`` (default 1) raises, or with ``SUITE_TEST_FAIL_HOW=kill`` SIGKILLs itself, after its
    ``SUITE_TEST_FAIL_AT_STEP``-th step, warm-up included (only in run ``SUITE_TEST_FAIL_RUN`` where that is set)."""
    at = os.environ.get("SUITE_TEST_FAIL_AT_STEP")
    if not at or rank != int(os.environ.get("SUITE_TEST_FAIL_RANK", "1")):
        return
    if os.environ.get("SUITE_TEST_FAIL_RUN", run_id) != run_id:
        return
    end_step = telemetry.end_step

    def failing_end_step(images: int, train_images: int = 0, eval_images: int = 0) -> None:
        end_step(images, train_images, eval_images)
        if telemetry.steps == int(at):
            if os.environ.get("SUITE_TEST_FAIL_HOW") == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError(f"injected failure after step {at} (SUITE_TEST_FAIL_AT_STEP)")

    telemetry.end_step = failing_end_step  # type: ignore[method-assign]  # this object only


def slow_down_steps(telemetry: Telemetry) -> None:
    """Every step takes ``1 + SUITE_TEST_SLOWDOWN`` times as long: the rank sleeps inside it."""
    factor = float(os.environ.get("SUITE_TEST_SLOWDOWN") or 0)
    if factor <= 0:
        return
    begin_step, end_step = telemetry.begin_step, telemetry.end_step
    began = [0.0]

    def timed_begin_step() -> None:
        if telemetry._step is None:  # begin_step is a no-op while a step runs: keep the first start
            began[0] = time.perf_counter()
        begin_step()

    def slowed_end_step(images: int, train_images: int = 0, eval_images: int = 0) -> None:
        time.sleep(factor * (time.perf_counter() - began[0]))
        end_step(images, train_images, eval_images)

    telemetry.begin_step = timed_begin_step  # type: ignore[method-assign]  # this object only
    telemetry.end_step = slowed_end_step  # type: ignore[method-assign]


def diverge_at_step(rank: int) -> None:
    """That rank's divergence check sees an infinite discriminator loss at its ``SUITE_TEST_DIVERGE_AT_STEP``-th generator
    step, the model itself unchanged (this process's :class:`LossWatch` only)."""
    at = os.environ.get("SUITE_TEST_DIVERGE_AT_STEP")
    if not at or rank != int(os.environ.get("SUITE_TEST_FAIL_RANK", "1")):
        return
    from ..gan.divergence import LossWatch

    done = LossWatch.done

    def diverging_done(self: LossWatch, step: int) -> None:
        if step == int(at):
            self.row()[0] = float("inf")  # the step's first discriminator loss, as the check will read it
        done(self, step)

    LossWatch.done = diverging_done  # type: ignore[method-assign]  # this process only
