"""tool, webhook_out and code: one ``lambda:invoke`` Task in the step type's function."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from relayflow.compiler.scope import ScopeContext


def emit_task(ctx: ScopeContext, key: str, step: Any) -> None:
    ctx.machine.add(key, ctx.lambda_task(key, step, step.type, step.on_success))
