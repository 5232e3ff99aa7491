"""tool, webhook_out and code: one ``lambda:invoke`` Task in the step type's function."""

from __future__ import annotations

from typing import Any

from relayflow.compiler.emitter import Emitter


def emit_task(ctx: Emitter, key: str, step: Any) -> None:
    ctx.machine.add(key, ctx.lambda_task(key, step, step.type, step.on_success))
