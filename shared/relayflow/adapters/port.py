"""The shape every Relayflow port to one AWS service shares (Step Functions, EventBridge
Scheduler, EventBridge, CloudWatch Logs, IAM): a boto3 client, given or looked up at each
call, and (through :meth:`AwsPort._call`) calls whose ``ClientError`` becomes one of the
port's own named exceptions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

#: The error codes AWS answers a throttled request with (after the client's own retries).
THROTTLING_CODES = frozenset({"ThrottlingException", "TooManyRequestsException"})


class AwsPort:
    """One AWS service. ``client`` is a boto3 client for :attr:`service` (default:
    ``adapters.aws.client(service)``, looked up at each call, so tests and the local
    runtime can point it elsewhere); :meth:`translate` names a failed call."""

    #: The boto3 service name (``stepfunctions``, ``scheduler``, ``events``).
    service: ClassVar[str]
    #: The port's own exception: what a failed call raises unless :attr:`errors` names one.
    error: ClassVar[type[Exception]] = Exception
    #: The exception of each AWS error code the port tells apart (throttling among them).
    errors: ClassVar[Mapping[str, type[Exception]]] = {}

    def __init__(self, client: Any | None = None) -> None:
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is not None:
            return self._client
        from relayflow.adapters.aws import client

        return client(self.service)

    def _call(self, action: str, **params: Any) -> dict[str, Any]:
        from botocore.exceptions import ClientError

        try:
            return dict(getattr(self.client, action)(**params))
        except ClientError as exc:
            raise self.translate(exc, action) from exc

    def translate(self, exc: Exception, action: str) -> Exception:
        """The port's exception for a ``ClientError`` of ``action``: ``"<action>: <code>:
        <AWS's message>"``, of the class :meth:`error_class` picks."""
        error = getattr(exc, "response", {}).get("Error", {})
        code = str(error.get("Code", ""))
        raised = self.error_class(code, str(error.get("Message", "")))
        return raised(f"{action}: {code}: {error.get('Message', exc)}")

    def error_class(self, code: str, message: str) -> type[Exception]:
        """The exception class of AWS error ``code`` (with ``message``, AWS's own words)."""
        return self.errors.get(code, self.error)
