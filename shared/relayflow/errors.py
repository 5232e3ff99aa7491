"""The named errors a step raises: the contract between step code and ASL ``Retry``/``Catch``.

Lambda reports ``type(exc).__name__`` as the ``errorType`` of an unhandled exception, and
Step Functions matches ``ErrorEquals`` against it. Each class therefore carries its ASL name
(``Relayflow.Transient``…) as its ``__name__``, so raising it is all a handler has to do.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar


class RelayflowError(Exception):
    """Base of every named error. ``error_name`` is what ``ErrorEquals`` matches."""

    error_name: ClassVar[str] = "Relayflow.Error"
    #: Whether retrying the same call can succeed. Compiled default retries skip the others.
    retryable: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.__name__ = cls.error_name
        cls.__qualname__ = cls.error_name

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.error_name, "message": self.message, **self.details}

    def reported(self) -> str:
        """The text a step function reports as its Lambda ``errorMessage``: the message,
        then the details (:func:`with_details`), so a ``Catch`` (``$.error.Cause``) and the
        run's timeline keep them."""
        return with_details(self.message, self.details)


#: What separates a reported message from its details (:func:`with_details`).
DETAILS_MARK = "\n\nRelayflow details: "
#: Longest details text a reported message carries; longer details are left out (a Step
#: Functions cause holds at most 32,768 characters).
MAX_DETAILS_CHARS = 12_000


def with_details(message: str, details: dict[str, Any]) -> str:
    """``message``, then :data:`DETAILS_MARK` and the details as compact JSON (none when
    there are none, or when they would pass :data:`MAX_DETAILS_CHARS`)."""
    if not details:
        return message
    try:
        text = json.dumps(details, separators=(",", ":"), ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return message
    return message if len(text) > MAX_DETAILS_CHARS else f"{message}{DETAILS_MARK}{text}"


def split_details(reported: str) -> tuple[str, dict[str, Any] | None]:
    """A reported message back into its message and details (``None`` when it has none)."""
    message, mark, text = reported.rpartition(DETAILS_MARK)
    if not mark:
        return reported, None
    try:
        details = json.loads(text)
    except ValueError:
        return reported, None
    return (message, details) if isinstance(details, dict) else (reported, None)


RelayflowError.__name__ = RelayflowError.error_name
RelayflowError.__qualname__ = RelayflowError.error_name


class TransientError(RelayflowError):
    """A failure that may pass on its own: network errors, timeouts, 429, 502-504."""

    error_name = "Relayflow.Transient"
    retryable = True


class ExpressionError(RelayflowError):
    """A template or expression failed to evaluate against the state document."""

    error_name = "Relayflow.ExpressionError"


class InvalidArgsError(RelayflowError):
    """A step received arguments it cannot act on; retrying cannot help."""

    error_name = "Relayflow.InvalidArgs"


class MaxStepsExceeded(RelayflowError):
    """A cyclic workflow ran more steps than ``max_steps_per_run`` allows."""

    error_name = "Relayflow.MaxStepsExceeded"


class HttpError(RelayflowError):
    """A non-2xx answer that retrying will not change (4xx other than 408/429, and 5xx other
    than 502-504). ``details`` carries ``status`` and a truncated ``body``."""

    error_name = "Relayflow.HttpError"


class ToolNotFound(RelayflowError):
    """A tool step names a tool that is not in the catalogue."""

    error_name = "Relayflow.ToolNotFound"


class SsrfBlocked(RelayflowError):
    """An outbound URL failed the SSRF guard; the message says which rule refused it."""

    error_name = "Relayflow.SsrfBlocked"


class CodeError(RelayflowError):
    """User code raised, or did not compile; ``details`` carries the line number."""

    error_name = "Relayflow.CodeError"


class CodeLimitExceeded(RelayflowError):
    """User code ran past its CPU time, memory or wall-clock limit."""

    error_name = "Relayflow.CodeLimitExceeded"


class Throttled(RelayflowError):
    """The step's concurrency or rate limit is reached. The compiled Retry for this name waits
    and tries again without using up the step's own retry policy."""

    error_name = "Relayflow.Throttled"
    retryable = True


class CircuitOpen(RelayflowError):
    """The tool's circuit breaker is open: the call was not made. ``details`` say when it
    lets a trial through."""

    error_name = "Relayflow.CircuitOpen"
    retryable = True


class PayloadTooLarge(RelayflowError):
    """A step output too large for the state document could not be offloaded to S3 (the
    function may hold no S3 permission, as the code function does)."""

    error_name = "Relayflow.PayloadTooLarge"


class TooManyItems(RelayflowError):
    """A for_each received more items than its ``max_items``."""

    error_name = "Relayflow.TooManyItems"


class NotAList(RelayflowError):
    """A for_each's items are not a list (absent, null, a string, a number, a boolean or an
    object). Raised by the compiled state machine before the Map, along the step's failure
    route."""

    error_name = "Relayflow.NotAList"


class SubWorkflowDepth(RelayflowError):
    """A sub_workflow step would start a child deeper than the nesting limit (runaway
    recursion). Raised by the compiled state machine before any child starts; retrying cannot
    change the depth."""

    error_name = "Relayflow.SubWorkflowDepth"


class SubWorkflowFailed(RelayflowError):
    """A sub_workflow step's child run failed, timed out or was aborted. The compiled Cause is
    JSON: ``{"child_run_id", "status", "error", "cause"}`` (the child's error and cause)."""

    error_name = "Relayflow.SubWorkflowFailed"


class InvalidRunInput(RelayflowError):
    """A run's input (a trigger payload, a child run's input, an agent's workflow tool
    arguments) breaks the workflow's declared ``input_schema``
    (:mod:`relayflow.definition.input_schema`)."""

    error_name = "Relayflow.InvalidInput"


class WorkflowNotFound(RelayflowError):
    """A sub_workflow step with a templated ``workflow_id`` rendered the id of no workflow of
    the run's tenant. Raised by the compiled state machine (the child's start was refused);
    it routes like any step failure."""

    error_name = "Relayflow.WorkflowNotFound"


class StepThroughOff(RelayflowError):
    """A step-through run was told to run to its end: its gates stop pausing. Raised by the
    gate and caught by it (the step then runs at once); never a failure of the run."""

    error_name = "Relayflow.StepThroughOff"


class ModelError(RelayflowError):
    """A model provider refused the request (4xx other than 408/429, a validation or access
    error): retrying the same request cannot help. ``details`` carry the provider and status."""

    error_name = "Relayflow.ModelError"


class ModelResponseInvalid(RelayflowError):
    """A model provider answered with something that is not its documented format (a body that
    is not JSON, a message without content, a tool call without a name)."""

    error_name = "Relayflow.ModelResponseInvalid"


class AgentMaxTurns(RelayflowError):
    """An agent still asked for tools after ``max_turns`` model turns."""

    error_name = "Relayflow.AgentMaxTurns"


class AgentTokenBudget(RelayflowError):
    """An agent's model turns used more tokens (input + output) than its ``token_budget``."""

    error_name = "Relayflow.AgentTokenBudget"


class AgentOutputInvalid(RelayflowError):
    """An agent's final answer did not match its ``output_schema`` / ``outcomes``, even after
    the one corrective turn."""

    error_name = "Relayflow.AgentOutputInvalid"


class AgentOutcomeInherited(RelayflowError):
    """An agent picked an outcome routed to ``inherit``: the step's failure handling runs.
    Raised by the compiled state machine, never by a Lambda."""

    error_name = "Relayflow.AgentOutcomeInherited"


class BatchFailed(RelayflowError):
    """An llm_batch job failed as a whole (failed, expired or cancelled by the provider, or
    every item failed). Per-item failures are reported per item in the output instead."""

    error_name = "Relayflow.BatchFailed"


class BatchDeadline(RelayflowError):
    """An llm_batch job did not finish before the step's ``deadline_seconds``."""

    error_name = "Relayflow.BatchDeadline"


class BatchTooSmall(RelayflowError):
    """A Bedrock batch inference job would hold fewer records than the account's quota
    ("minimum number of records per batch inference job") and the step does not fall back."""

    error_name = "Relayflow.BatchTooSmall"


class ParkTimeout(RelayflowError):
    """A parked run was not resumed within its step's ``park_timeout``. Raised by the
    compiled state machine; it takes the parked step's failure route."""

    error_name = "Relayflow.ParkTimeout"


class BranchesFailed(RelayflowError):
    """A ``settle: all`` parallel with ``fail_when: any`` had a failed branch (raised by the
    compiled machine once every branch ended; each failed step's record holds its error)."""

    error_name = "Relayflow.BranchesFailed"


#: Errors that cannot succeed on retry. A retry policy without ``retry_on`` skips them.
BASE_NON_RETRYABLE_ERRORS: tuple[str, ...] = (
    InvalidArgsError.error_name,
    ExpressionError.error_name,
    HttpError.error_name,
    ToolNotFound.error_name,
    SsrfBlocked.error_name,
    CodeError.error_name,
    CodeLimitExceeded.error_name,
    PayloadTooLarge.error_name,
)
#: The AI steps' deterministic failures. A retry of an agent replays its recorded model turns
#: and tool calls, so it reaches the same max_turns, budget or invalid answer; an llm_batch
#: retry polls the same recorded job. A refused request (ModelError) is refused again.
#: ModelResponseInvalid stays retryable: an unrecorded turn is asked again. Only machines
#: with an agent or llm_batch step can raise them, so only those list them (every retrier
#: repeats the list, and a long chain of retried steps would pay for it in definition size).
AI_NON_RETRYABLE_ERRORS: tuple[str, ...] = (
    ModelError.error_name,
    AgentMaxTurns.error_name,
    AgentTokenBudget.error_name,
    AgentOutputInvalid.error_name,
    BatchFailed.error_name,
    BatchDeadline.error_name,
    BatchTooSmall.error_name,
)
NON_RETRYABLE_ERRORS: tuple[str, ...] = BASE_NON_RETRYABLE_ERRORS + AI_NON_RETRYABLE_ERRORS
