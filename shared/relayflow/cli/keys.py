"""``relayflow keys``: create and revoke API keys, on a deployed table directly (``--table``)
or through a local server's admin routes (``--api --admin-token``)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from relayflow.cli.api import API_URL_ENV, ApiClient, api_commands, segment
from relayflow.cli.output import EXIT_OK, UsageError, print_json
from relayflow.cli.parsing import arg, command_group


def _keys_backend(args: argparse.Namespace) -> tuple[str, Any]:
    """``("table", ControlPlane)`` for ``--table``, else ``("api", ApiClient)`` for a local
    server's admin routes."""
    if args.table:
        from relayflow.control.service import ControlPlane
        from relayflow.dal import Dal

        return "table", ControlPlane(dal=Dal(table_name=args.table))
    url = args.api or os.environ.get(API_URL_ENV)
    if not url or not args.admin_token:
        raise UsageError(
            "pass --table NAME (a deployed table), or --api URL --admin-token TOKEN (a local "
            "server started with `relayflow serve`)"
        )
    return "api", ApiClient(url, admin_token=args.admin_token)


def cmd_keys_create(args: argparse.Namespace) -> int:
    kind, backend = _keys_backend(args)
    if kind == "table":
        from relayflow.control.errors import ApiError

        try:
            key = backend.create_api_key(args.tenant, args.name).model_dump(mode="json")
        except ApiError as exc:  # a bad or reserved tenant id, a bad name: the caller's to fix
            raise UsageError(f"{exc.message} ({exc.code})") from exc
    else:
        with backend:
            _, key = backend.call(
                "POST", "/admin/keys", json={"tenant": args.tenant, "name": args.name}
            )
    if args.json:
        print_json(key)
    else:
        print(f"key {key['key_id']} for tenant {key['tenant']} ({key['name']})")
        print(f"secret (shown once): {key['secret']}")
    return EXIT_OK


def cmd_keys_revoke(args: argparse.Namespace) -> int:
    kind, backend = _keys_backend(args)
    if kind == "table":
        key = backend.revoke_api_key(args.key_id).model_dump(mode="json")
    else:
        with backend:
            _, key = backend.call("DELETE", f"/admin/keys/{segment(args.key_id)}")
    if args.json:
        print_json(key)
    else:
        print(f"key {key['key_id']} of tenant {key['tenant']} revoked at {key['revoked_at']}")
    return EXIT_OK


def _keys_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--table", help="the deployed Relayflow DynamoDB table (direct access)")
    parser.add_argument("--api", help=f"a local server's URL (default: ${API_URL_ENV})")
    parser.add_argument("--admin-token", help="the admin token `relayflow serve` printed")
    parser.add_argument("--json", action="store_true", help="print the key as JSON")


#: ``relayflow keys ...``: each command's name, help line, function and arguments.
_COMMANDS = (
    (
        "create",
        "create an API key (its secret is shown once)",
        cmd_keys_create,
        arg("--tenant", required=True),
        arg("--name", required=True),
    ),
    ("revoke", "revoke an API key by its key id", cmd_keys_revoke, arg("key_id")),
)


def add_keys_commands(sub: Any) -> None:
    """``relayflow keys create|revoke``."""
    keys = command_group(sub, "keys", "create and revoke API keys")
    api_commands(keys, _COMMANDS, common=_keys_options)
