"""The ``relayflow`` command line.

``schema``, ``validate``, ``compile``, ``graph`` and ``run`` work on files; ``schedule preview``
shows a cron expression's fire times; ``serve`` runs the control API locally; ``deploy``,
``runs`` and ``keys`` talk to a control API (``--api URL --api-key KEY``, or
``RELAYFLOW_API_URL`` / ``RELAYFLOW_API_KEY``). Exit codes: 0 success, 1 a run that did not
succeed or a request the API refused, 2 an invalid definition or bad arguments, 3 a compiler
bug (the compiled state machine breaks an ASL rule: nothing was written, run or deployed).

This module is the composition root: it builds the parser from each command group's module
and maps the errors they raise to exit codes. The groups import only the shared bottom
modules (:mod:`relayflow.cli.output`, :mod:`relayflow.cli.parsing`, :mod:`relayflow.cli.inputs`,
:mod:`relayflow.cli.api`, :mod:`relayflow.cli.workflow_files`, :mod:`relayflow.cli.json_docs`)
and their own helpers (``run`` its :mod:`relayflow.cli.run_waits`), never this module or each
other.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

# Light: each module loads its heavy parts on first use, so `--help` and `--version` stay fast.
from relayflow.cli.api import ApiFailure, ApiUnreachable, print_api_failure
from relayflow.cli.breakers import add_breakers_commands
from relayflow.cli.definitions import add_definition_commands
from relayflow.cli.deploy import add_deploy_command
from relayflow.cli.dlq import add_dlq_commands
from relayflow.cli.keys import add_keys_commands
from relayflow.cli.ops import add_ops_commands
from relayflow.cli.output import (
    EXIT_COMPILER_BUG,
    EXIT_INVALID,
    EXIT_RUN_FAILED,
    UsageError,
    print_problems,
)
from relayflow.cli.run import add_run_command
from relayflow.cli.runs import add_runs_commands
from relayflow.cli.schedule import add_schedule_commands
from relayflow.cli.serve import add_serve_command
from relayflow.cli.waits import add_wait_commands
from relayflow.cli.workflows import add_workflows_commands
from relayflow.definition import DefinitionError


def build_parser() -> argparse.ArgumentParser:
    """The ``relayflow`` parser: every command group, in the order ``--help`` lists them."""
    from relayflow import __version__

    parser = argparse.ArgumentParser(prog="relayflow", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"relayflow {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for add_commands in (
        add_definition_commands,
        add_run_command,
        add_schedule_commands,
        add_serve_command,
        add_deploy_command,
        add_runs_commands,
        add_workflows_commands,
        add_breakers_commands,
        add_dlq_commands,
        add_wait_commands,
        add_keys_commands,
        add_ops_commands,
    ):
        add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one ``relayflow`` command (``argv``; default: the process's arguments) and return
    its exit code."""
    called_at = time.monotonic()
    args = build_parser().parse_args(argv)  # --help, --version and usage errors end here
    from relayflow.compiler.check import CompiledMachineInvalid

    args.called_at, args.whole_process = called_at, argv is None
    try:
        code = int(args.func(args))
        if getattr(args, "abandoned", False) and args.whole_process:
            # The abandoned run's threads (the runtime, a step still working) must not hold
            # the exit up, nor be torn down mid-call by the interpreter's shutdown.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        return code
    except CompiledMachineInvalid as exc:
        print(
            "relayflow: internal error: the compiler produced a state machine that Step "
            f"Functions would refuse ({len(exc.violations)} rule(s) broken). This is a Relayflow "
            "bug; nothing was written, run or deployed. Please report it with the definition.",
            file=sys.stderr,
        )
        for violation in exc.violations:
            print(f"  {violation}", file=sys.stderr)
        return EXIT_COMPILER_BUG
    except DefinitionError as exc:
        print(f"relayflow: {len(exc.problems)} problem(s) in the definition:", file=sys.stderr)
        print_problems(exc, sys.stderr)
        return EXIT_INVALID
    except UsageError as exc:
        print(f"relayflow: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except ApiFailure as exc:
        print_api_failure(exc, sys.stderr)
        return EXIT_INVALID if exc.status == 422 else EXIT_RUN_FAILED
    except ApiUnreachable as exc:
        print(f"relayflow: {exc}", file=sys.stderr)
        return EXIT_RUN_FAILED


if __name__ == "__main__":
    sys.exit(main())
