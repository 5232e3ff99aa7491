"""What the HTTP providers share: one guarded POST with the providers' error mapping."""

from __future__ import annotations

import json
from typing import Any

from relayflow.errors import HttpError, ModelError, ModelResponseInvalid, TransientError

#: A model call may think for a while; the step's own timeout bounds it further.
MODEL_TIMEOUT_SECONDS = 120.0


class HttpApi:
    """An HTTP model API's connection: its base URL (``default_base_url`` when none is
    given, without a trailing slash) and the secret reference of its API key. The Messages
    and Chat Completions providers and their batch APIs are built the same way."""

    name: str
    default_base_url: str

    def __init__(self, base_url: str | None = None, api_key_ref: Any = None) -> None:
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        self.api_key_ref = api_key_ref

    def key(self) -> str | None:
        """The API key (read from its secret), or ``None`` when none is configured."""
        return api_key(self.api_key_ref, self.name)


def api_key(ref: Any, provider: str) -> str | None:
    """The API key behind a secret reference (Secrets Manager or SSM), or ``None``."""
    if ref is None:
        return None
    from relayflow.tools.secrets import resolve_secret

    return resolve_secret(ref)


def get_json(provider: str, url: str, headers: dict[str, str]) -> dict[str, Any]:
    """GET a JSON object, with :func:`post_json`'s error mapping."""
    return _parsed(provider, _send(provider, "GET", url, headers, None))


def get_text(provider: str, url: str, headers: dict[str, str]) -> str:
    """GET a text body (JSONL results), with :func:`post_json`'s error mapping."""
    return _send(provider, "GET", url, headers, None).text


def post_json(
    provider: str, url: str, headers: dict[str, str], body: dict[str, Any]
) -> dict[str, Any]:
    """POST ``body`` through the SSRF-guarded client; the answer's JSON object.

    Timeouts, network errors, 408, 429 and every 5xx (Anthropic's 529 "overloaded" included)
    are ``Relayflow.Transient`` (with ``retry_after`` when the server sent one); any other
    non-2xx is ``Relayflow.ModelError``; a 2xx whose body is not a JSON object is
    ``Relayflow.ModelResponseInvalid``. Error messages name the provider, the status and the
    reason the body gives (``error.message``); ``details`` keep ``status`` and a redacted
    excerpt of the body (``body``, at most 4 KB). Neither ever holds a header (the API
    key)."""
    content = json.dumps(body, separators=(",", ":")).encode()
    return _parsed(provider, _send(provider, "POST", url, headers, content))


def post_multipart(
    provider: str,
    url: str,
    headers: dict[str, str],
    fields: dict[str, str],
    file: tuple[str, str, bytes],
) -> dict[str, Any]:
    """POST ``multipart/form-data`` (``fields`` and one ``file``: name, filename, bytes), with
    :func:`post_json`'s error mapping; the answer's JSON object."""
    import hashlib

    boundary = "relayflow-" + hashlib.sha256(file[2]).hexdigest()[:24]
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        for name, value in fields.items()
    ]
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{file[0]}"; '
        f'filename="{file[1]}"\r\nContent-Type: application/jsonl\r\n\r\n'.encode()
        + file[2]
        + b"\r\n"
    )
    body = b"".join(parts) + f"--{boundary}--\r\n".encode()
    content_type = f"multipart/form-data; boundary={boundary}"
    return _parsed(provider, _send(provider, "POST", url, headers, body, content_type))


def _send(
    provider: str,
    method: str,
    url: str,
    headers: dict[str, str],
    content: bytes | None,
    content_type: str = "application/json",
) -> Any:
    from relayflow.net.http import error_excerpt, raise_for_status, request

    sent = dict(headers)
    if content is not None:
        sent["Content-Type"] = content_type
    response = request(
        method, url, headers=sent, content=content, timeout=MODEL_TIMEOUT_SECONDS, max_redirects=0
    )
    status = response.status_code
    secrets = list(headers.values())  # the key, whatever header carries it
    if status >= 500 or status in (408, 429):
        details: dict[str, Any] = {}
        try:
            raise_for_status(response, secrets)
        except TransientError as exc:  # 408, 429, 502-504: keeps retry_after
            details = exc.details
        except HttpError as exc:  # 500, 529 (overloaded)…: a model server's 5xx passes too
            details = exc.details
        raise TransientError(
            _refusal(f"{provider} answered {status} {response.reason_phrase}", response, secrets),
            provider=provider,
            **details,
        )
    if not 200 <= status < 300:
        # The provider's own reason ("max_tokens: 99999 > 64000, which is the maximum…")
        # is what a person needs: it goes into the message, and a redacted excerpt of the
        # body (at most 4 KB) into details.
        raise ModelError(
            _refusal(
                f"{provider} refused the request: {status} {response.reason_phrase}",
                response,
                secrets,
            ),
            provider=provider,
            status=status,
            body=error_excerpt(response, secrets),
        )
    return response


def _refusal(head: str, response: Any, secrets: list[str]) -> str:
    from relayflow.net.http import body_reason

    reason = body_reason(response, secrets)
    return f"{head.rstrip()}: {reason}" if reason else head.rstrip()


def _parsed(provider: str, response: Any) -> dict[str, Any]:
    from relayflow.net.http import error_excerpt

    try:
        parsed = json.loads(response.content)
    except ValueError:
        raise ModelResponseInvalid(
            f"{provider} answered {response.status_code} with a body that is not JSON",
            provider=provider,
            body=error_excerpt(response, limit=200),
        ) from None
    if not isinstance(parsed, dict):
        raise ModelResponseInvalid(f"{provider} answered with JSON that is not an object")
    return parsed


def tool_result_text(content: Any) -> str:
    """A tool result as the text the HTTP providers carry: strings as is, the rest JSON."""
    return content if isinstance(content, str) else json.dumps(content, separators=(",", ":"))
