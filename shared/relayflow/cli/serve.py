"""``relayflow serve``: the control API on this machine, with everything in memory (the local
runtime, the table, the bus, the authorizer and the recorder), or kept in a directory across
restarts with ``--state DIR``."""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any

from relayflow.cli.api import API_KEY_ENV, API_URL_ENV
from relayflow.cli.inputs import resources_option
from relayflow.cli.output import EXIT_INVALID, EXIT_OK, EXIT_RUN_FAILED


def _stop_on_sigterm() -> None:
    """SIGTERM (a process manager, ``kill``) stops the server as Ctrl-C does."""

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)


def cmd_serve(args: argparse.Namespace) -> int:
    import threading

    from relayflow.local.serve import LocalServer
    from relayflow.local.state_dir import StateDirError

    resources = resources_option(args.resources) if args.resources else None
    try:
        server = LocalServer(
            args.host,
            args.port,
            time_scale=args.time_scale,
            rate_per_second=args.rate_limit,
            rate_burst=max(1, int(args.rate_limit * 4)),
            access_log=sys.stderr,
            maintenance_interval=60.0,
            state_dir=args.state,
        )
        server.__enter__()
        if resources is not None:
            from relayflow.local.resources import provision

            created = provision(resources)
        aws = _expose_aws(args.aws_host or args.host, args.aws_port)
    except StateDirError as exc:
        print(f"relayflow: --state {args.state}: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except OSError as exc:
        print(
            f"relayflow: cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr
        )
        return EXIT_RUN_FAILED
    try:
        print(f"Relayflow control API on {server.url} (Swagger UI: {server.url}/swagger)")
        print(f"API key of tenant 'local': {server.bootstrap_key}")
        print(f"admin token (relayflow keys --admin-token): {server.admin_token}")
        print(f"Console: {server.url}/console/login#key={server.bootstrap_key}")
        print(f"  export {API_URL_ENV}={server.url} {API_KEY_ENV}={server.bootstrap_key}")
        if aws is not None:
            print(f"in-memory AWS on {aws.url} (sam local invoke --env-vars events/env.json)")
        if resources is not None:
            made = sum(len(names) for names in created.values())
            print(f"created {made} resource(s) from {args.resources} in the in-memory AWS")
        _print_state(server)
        _stop_on_sigterm()
        threading.Event().wait()
    except KeyboardInterrupt:
        print("stopping", file=sys.stderr)
    finally:
        if aws is not None:
            aws.close()
        server.__exit__(None, None, None)
    return EXIT_OK


def _print_state(server: Any) -> None:
    """The banner's last line: where the state lives (and what a restart brought back)."""
    state = server.state
    if state is None:
        print(
            "Everything (workflows, runs, API keys, waits) lives in memory: Ctrl-C stops the "
            "server and forgets it (--state DIR keeps it).",
            flush=True,
        )
        return
    if state.restored:
        counts = state.counts()
        revived = state.revived
        print(
            f"restored from {state.dir.path}: {counts['workflows']} workflow(s), "
            f"{counts['runs']} run(s); {len(revived.revived)} run(s) under way go on, "
            f"{len(revived.failed)} could not (failed: Relayflow.ServerStopped)"
        )
    print(
        f"State (workflows, runs, API keys, waits) is {state.describe()}: a restart with "
        "the same --state goes on where this one stops.",
        flush=True,
    )


def _expose_aws(host: str, port: int | None) -> Any:
    """``--aws-port`` (and ``--aws-host``): serve's in-memory AWS on a port
    (relayflow.local.aws_server)."""
    if port is None:
        return None
    from relayflow.local.aws_server import ExposedAws

    return ExposedAws(host, port).__enter__()


def add_serve_command(sub: Any) -> None:
    """``relayflow serve``."""
    p = sub.add_parser(
        "serve", help="run the control API locally (local runtime, in memory or --state DIR)"
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument(
        "--time-scale",
        type=float,
        default=0.001,
        help="multiply Wait and retry delays by this (default 0.001; 1 = real time)",
    )
    p.add_argument(
        "--rate-limit",
        type=float,
        default=50.0,
        help="requests per second per API key before 429 (default 50, bursts of 4x)",
    )
    p.add_argument(
        "--aws-port",
        type=int,
        help="also serve the in-memory AWS (moto) on this port, e.g. 4566, for `sam local "
        "invoke --env-vars events/env.json` (docs/development.md)",
    )
    p.add_argument(
        "--aws-host",
        help="address the in-memory AWS listens on (default: --host). On Linux, a `sam local` "
        "container reaches the host through the Docker bridge, not 127.0.0.1: use 0.0.0.0 "
        "(or the bridge's address, e.g. 172.17.0.1)",
    )
    p.add_argument(
        "--resources",
        help="YAML file of tables, queues, buses, identities and secrets to create in moto "
        "first (as `relayflow run --resources`)",
    )
    p.add_argument(
        "--state",
        metavar="DIR",
        help="keep workflows, runs, API keys and waits in DIR across restarts (created if "
        "missing; runs under way go on after the restart). Default: all in memory",
    )
    p.set_defaults(func=cmd_serve)
