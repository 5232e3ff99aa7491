"""Compatibility layer over moto's Step Functions interpreter (moto 5.2.5 only).

moto runs real ASL, but about 40 documented behaviours differ from AWS
(``notes/moto-asl.md``). Each fix restores one of them that compiled Relayflow ASL can reach,
names the finding and the AWS behaviour in its docstring, and has a test in
``tests/integration/local/`` that fails without it. The ASL itself never changes to suit moto.
The fixes register through :func:`relayflow.local.compat_registry.fix` in one module per
finding family: ``compat_infrastructure`` (always applied), ``compat_interpreter``,
``compat_callbacks``, ``compat_api``, ``compat_versions``, ``compat_sync``,
``compat_definition``, ``compat_distributed``, ``compat_express``, ``compat_logs``. This
module is the composition point: it imports every family and applies their fixes in that
order (:data:`FAMILIES`).

Patches are process-wide, idempotent and reversible (:func:`apply` / :func:`revert`);
:class:`~relayflow.local.runtime.LocalRuntime` applies all of them on ``__enter__``. The
*infrastructure* patches (Lambda routing, client cache, scaled waits, halt notification,
termination hook) are what makes the runtime work and are always applied.

Every patch targets a private API of one exact moto version, so :func:`check_moto_version`
refuses any other version instead of patching it blindly.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from relayflow.local import (
    compat_api,
    compat_archive,
    compat_callbacks,
    compat_definition,
    compat_distributed,
    compat_express,
    compat_infrastructure,
    compat_interpreter,
    compat_logs,
    compat_sync,
    compat_versions,
)
from relayflow.local.compat_registry import Fix, Patches, registered

MOTO_VERSION = "5.2.5"

#: The finding families, in the order their fixes are applied.
FAMILIES = (
    compat_infrastructure,
    compat_interpreter,
    compat_callbacks,
    compat_api,
    compat_versions,
    compat_sync,
    compat_definition,
    compat_distributed,
    compat_express,
    compat_logs,
    compat_archive,
)


class MotoVersionError(RuntimeError):
    """The installed moto is not the version this layer was written and tested against."""


def check_moto_version() -> None:
    """Fail loudly unless moto is exactly :data:`MOTO_VERSION`."""
    import moto

    if moto.__version__ != MOTO_VERSION:
        raise MotoVersionError(
            f"relayflow.local needs moto=={MOTO_VERSION} (its compatibility layer patches that "
            f"version's interpreter); found moto {moto.__version__}. "
            f"Install it with: pip install 'moto[stepfunctions]=={MOTO_VERSION}'"
        )


_applied: dict[str, Patches] = {}
_apply_lock = threading.RLock()


def fixes() -> list[Fix]:
    """Every fix, in the order it is applied: by family (:data:`FAMILIES`), then as its
    module defines them."""
    order = {family.__name__: index for index, family in enumerate(FAMILIES)}
    return sorted(registered(), key=lambda fix: order[fix.install.__module__])


def apply(skip: Iterable[str] = ()) -> None:
    """Apply every fix except ``skip`` (infrastructure fixes cannot be skipped). Idempotent.

    ``skip`` exists so a test can show that a fix is needed; a skipped fix that was applied
    before is reverted (with the fixes applied after it, which are applied again).
    """
    check_moto_version()
    _import_interpreter()
    skipped = set(skip)
    unknown = skipped - {fix.name for fix in fixes()}
    if unknown:
        raise ValueError(f"unknown compat fixes: {sorted(unknown)}")
    wanted = [fix for fix in fixes() if fix.infrastructure or fix.name not in skipped]
    with _apply_lock:
        # A fix may wrap what an earlier one installed (several wrap moto's parser), so
        # what was applied after a fix that changes is undone and applied again, in order:
        # reverting one wrapper in the middle would otherwise drop the ones above it.
        current = list(_applied)
        keep = 0
        while keep < min(len(current), len(wanted)) and current[keep] == wanted[keep].name:
            keep += 1
        for name in reversed(current[keep:]):
            _applied.pop(name).revert()
        for fix in wanted[keep:]:
            patches = Patches()
            fix.install(patches)
            _applied[fix.name] = patches


def revert() -> None:
    """Undo every fix (the interpreter is plain moto again)."""
    with _apply_lock:
        for name in reversed(list(_applied)):
            _applied.pop(name).revert()


def applied() -> list[str]:
    return list(_applied)


def _import_interpreter() -> None:
    """Import every interpreter module that a fix patches, so that name-level patches
    (``set_everywhere``) reach all of them."""
    import moto.stepfunctions.parser.asl.component.state.choice.comparison.operator.implementations.string_operators  # noqa: E501
    import moto.stepfunctions.parser.asl.component.state.exec.state_map.state_map
    import moto.stepfunctions.parser.asl.component.state.exec.state_parallel.state_parallel
    import moto.stepfunctions.parser.asl.component.state.exec.state_task.state_task_factory
    import moto.stepfunctions.parser.asl.parse.asl_parser
    import moto.stepfunctions.parser.backend.execution
    import moto.stepfunctions.parser.models
    import moto.stepfunctions.responses  # noqa: F401
