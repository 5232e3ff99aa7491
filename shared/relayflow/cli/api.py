"""What the commands that talk to a control API share: the client, its errors, the ``--api``
options, and the two shapes most of them take (one call whose answer is printed, and a page of
a list printed as a table). Every command group over the API builds on this module."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any, TextIO

from relayflow.cli.output import EXIT_OK, UsageError, print_json, print_table
from relayflow.cli.parsing import Argument

API_URL_ENV, API_KEY_ENV = "RELAYFLOW_API_URL", "RELAYFLOW_API_KEY"


class ApiFailure(Exception):
    """The API answered with an error: reported with its code and message, exit code 1
    (2 for a definition it found invalid)."""

    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.body = body if isinstance(body, dict) else {"message": str(body)}
        super().__init__(f"{status} {self.body.get('code', 'error')}: {self.body.get('message')}")


class ApiUnreachable(Exception):
    """No answer from the API (connection refused, timeout): exit code 1."""


class ApiClient:
    """A small httpx client for the control API (and a local server's admin routes)."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        admin_token: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        import httpx

        headers = {"User-Agent": "relayflow-cli"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        if admin_token:
            headers["X-Admin-Token"] = admin_token
        self._http = httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout)
        self.url = url

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()

    def call(self, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        """Send one request; the status and the decoded JSON body. Raises :class:`ApiFailure`
        for an error status and :class:`ApiUnreachable` when no answer comes."""
        import httpx

        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ApiUnreachable(f"cannot reach the API at {self.url}: {exc}") from exc
        try:
            body = response.json() if response.content else None
        except ValueError:
            body = {"message": response.text[:200]}
        if response.status_code >= 400:
            raise ApiFailure(response.status_code, body)
        return response.status_code, body


def api_client(args: argparse.Namespace) -> ApiClient:
    """The client ``--api``/``--api-key`` (or their environment variables) name."""
    url = args.api or os.environ.get(API_URL_ENV)
    key = args.api_key or os.environ.get(API_KEY_ENV)
    if not url:
        raise UsageError(f"pass --api URL (or set {API_URL_ENV})")
    if not key:
        raise UsageError(f"pass --api-key KEY (or set {API_KEY_ENV})")
    return ApiClient(url, api_key=key)


def api_options(parser: argparse.ArgumentParser) -> None:
    """``--api``, ``--api-key`` and ``--json``: the options of every command over the API."""
    parser.add_argument("--api", help=f"control API URL (default: ${API_URL_ENV})")
    parser.add_argument("--api-key", help=f"API key (default: ${API_KEY_ENV})")
    parser.add_argument("--json", action="store_true", help="print the API's JSON answer")


def api_command(
    group: Any,
    name: str,
    help_text: str,
    func: Callable[[argparse.Namespace], int],
    *arguments: Argument,
    common: Callable[[argparse.ArgumentParser], None] = api_options,
) -> argparse.ArgumentParser:
    """Add the command ``name`` (listed with ``help_text``) to ``group`` (a subparsers action):
    its ``arguments`` in order, then the ``common`` options (``--api``, ``--api-key``,
    ``--json``); ``func`` runs it."""
    parser = group.add_parser(name, help=help_text)
    for names, options in arguments:
        parser.add_argument(*names, **options)
    common(parser)
    parser.set_defaults(func=func)
    return parser


#: A command of a group as a table row: its name, its help line, the function that runs it,
#: then its arguments (:func:`relayflow.cli.parsing.arg`) in order.
CommandRow = tuple[Any, ...]


def api_commands(
    group: Any,
    rows: tuple[CommandRow, ...],
    common: Callable[[argparse.ArgumentParser], None] = api_options,
) -> None:
    """Add each row's command to ``group`` with :func:`api_command`, in the order of ``rows``
    (the order ``--help`` lists them)."""
    for name, help_text, func, *arguments in rows:
        api_command(group, name, help_text, func, *arguments, common=common)


def segment(value: str) -> str:
    """``value`` as one URL path segment."""
    from urllib.parse import quote

    return quote(value, safe="")


def call_and_print(
    args: argparse.Namespace,
    method: str,
    path: str,
    text: Callable[[Any], str] | None = None,
    **request: Any,
) -> int:
    """The shape of most commands over the API: one request (``request``: ``json``,
    ``params``, ``headers``), its answer printed as JSON (with ``--json``, or when there is no
    ``text``) or as ``text(answer)``. An error answer raises :class:`ApiFailure`, which
    ``main`` maps to its exit code."""
    with api_client(args) as api:
        _, answer = api.call(method, path, **request)
    if args.json or text is None:
        print_json(answer)
    else:
        print(text(answer))
    return EXIT_OK


def endpoint(
    method: str,
    path: str,
    text: Callable[[Any], str] | None = None,
    body: Callable[[argparse.Namespace], Any] | None = None,
) -> Callable[[argparse.Namespace], int]:
    """A command that is one request, as a table row: ``method`` on ``path``, whose ``{name}``
    fields are the command's arguments of that name (each as one URL path segment), with the
    JSON ``body(args)`` when given; the answer printed by :func:`call_and_print`."""

    def command(args: argparse.Namespace) -> int:
        fields = {
            name: segment(value) for name, value in vars(args).items() if isinstance(value, str)
        }
        request = {} if body is None else {"json": body(args)}
        return call_and_print(args, method, path.format_map(fields), text, **request)

    return command


def page_query(args: argparse.Namespace) -> dict[str, Any]:
    """``limit``, and ``status`` (where the command has it) and ``next_token`` when given, of a
    list command."""
    params: dict[str, Any] = {"limit": args.limit}
    if getattr(args, "status", None):
        params["status"] = args.status
    if args.next_token:
        params["next_token"] = args.next_token
    return params


def list_command(
    path: str,
    headers: tuple[str, ...],
    row: Callable[[dict[str, Any]], tuple[str, ...]],
) -> Callable[[argparse.Namespace], int]:
    """A list command as a table row: ``GET path`` with :func:`page_query`'s parameters, the
    page printed by :func:`list_page` (``headers`` over one ``row(item)`` per item)."""

    def command(args: argparse.Namespace) -> int:
        return list_page(args, path, page_query(args), headers, row)

    return command


def list_page(
    args: argparse.Namespace,
    path: str,
    params: dict[str, Any],
    headers: tuple[str, ...],
    row: Callable[[dict[str, Any]], tuple[str, ...]],
) -> int:
    """A list command: ``GET path`` with ``params``, then the page as the API's JSON with
    ``--json``, else a table and, when there is more, the ``--next-token`` to pass (on
    stderr)."""
    with api_client(args) as api:
        _, page = api.call("GET", path, params=params)
    if args.json:
        print_json(page)
        return EXIT_OK
    print_table(headers, [row(item) for item in page["items"]], sys.stdout)
    if page.get("next_token"):
        print(f"more: --next-token {page['next_token']}", file=sys.stderr)
    return EXIT_OK


def print_api_failure(exc: ApiFailure, out: TextIO, file: str | None = None) -> None:
    """The API's error answer: its status, code and message, then one line per detail
    (a definition problem names ``file`` when given)."""
    body = exc.body
    print(f"relayflow: {exc.status} {body.get('code', 'error')}: {body.get('message')}", file=out)
    details = body.get("details")
    if isinstance(details, list):
        for item in details:
            print(f"  {_detail_line(item, file)}", file=out)
    elif details:
        print(f"  {json.dumps(details, default=str)}", file=out)


def _detail_line(item: Any, file: str | None) -> str:
    from relayflow.definition import Problem

    if isinstance(item, dict) and {"path", "rule", "message"} <= set(item):
        return str(Problem(file or item.get("file"), item["path"], item["rule"], item["message"]))
    if isinstance(item, dict) and {"rule", "state", "message"} <= set(item):
        where = f"state {item['state']!r}" if item["state"] is not None else "the state machine"
        return f"[{item['rule']}] {where}: {item['message']}"
    if isinstance(item, dict) and {"path", "message"} <= set(item):
        return f"{item['path']}: {item['message']}"
    return json.dumps(item, default=str)
