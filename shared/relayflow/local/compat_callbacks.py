"""Compatibility fixes for task tokens and stopping: heartbeat timeouts, ``SendTaskFailure``,
a token per attempt, and stopping an execution blocked in a task.

Registered through :mod:`relayflow.local.compat_registry` on import; applied in the order
:data:`relayflow.local.compat.FAMILIES` gives.
"""

from __future__ import annotations

import copy
import datetime
import threading
import time
from typing import Any

from relayflow.local.compat_registry import Patches, fix

HEARTBEAT_TIMEOUT = "States.HeartbeatTimeout"

#: The name of the thread that runs one attempt of a Task (``stop_blocked_task``): an attempt
#: abandoned by a stop or a timeout ends in it later, when its Lambda or callback returns.
ATTEMPT_THREAD_NAME = "relayflow-task-attempt"
_HISTORY_CLOSED_ATTR = "_relayflow_history_closed"
_HISTORY_LOCK_ATTR = "_relayflow_history_lock"


class _HeartbeatTimeoutMarker:
    """Mixin marking the error name of a missed heartbeat (see ``heartbeat_timeout_catch``)."""


@fix("heartbeat_timeout_catch", "notes row 9")
def _heartbeat_timeout_catch(patches: Patches) -> None:
    """A missed heartbeat is matched by ``States.HeartbeatTimeout`` in Retry and Catch (AWS
    error-handling docs: the name "is only available inside the Catch and Retry fields") and
    still by ``States.Timeout``, which AWS documents as covering missed heartbeats; the error
    reported stays ``States.Timeout``. moto's ``States.HeartbeatTimeout`` catcher never
    matched."""
    from moto.stepfunctions.parser.asl.component.common.error_name.error_equals_decl import (
        ErrorEqualsDecl,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import (
        StatesErrorName,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (
        StatesErrorNameType,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.state_task import (
        StateTask,
    )
    from moto.stepfunctions.parser.asl.eval.callback.callback import HeartbeatTimeoutError

    class HeartbeatTimeoutName(_HeartbeatTimeoutMarker, StatesErrorName):
        def __init__(self) -> None:
            super().__init__(typ=StatesErrorNameType.StatesTimeout)

    original_from_error = StateTask._from_error
    original_matches = ErrorEqualsDecl._eval_body

    def from_error(self: Any, env: Any, ex: Exception) -> Any:
        if isinstance(ex, HeartbeatTimeoutError):
            failure_event = self._get_timed_out_failure_event(env)
            failure_event.error_name = HeartbeatTimeoutName()
            return failure_event
        return original_from_error(self, env, ex)

    def error_equals(self: Any, env: Any) -> None:
        error_name = env.stack[-1]
        original_matches(self, env)
        if (
            env.stack[-1] is False
            and isinstance(error_name, _HeartbeatTimeoutMarker)
            and any(name.error_name == HEARTBEAT_TIMEOUT for name in self.error_names)
        ):
            env.stack[-1] = True

    patches.set(StateTask, "_from_error", from_error)
    patches.set(ErrorEqualsDecl, "_eval_body", error_equals)


@fix("send_task_failure_cause", "notes row 9")
def _send_task_failure_cause(patches: Patches) -> None:
    """``SendTaskFailure`` passes its ``cause`` on to the failed Task (and so to a Catch's
    ``Cause``), as on AWS. moto's response handler dropped ``cause``, leaving it null."""
    from moto.core.responses import EmptyResult
    from moto.stepfunctions.responses import StepFunctionResponse

    def send_task_failure(self: Any) -> Any:
        self.stepfunction_backend.send_task_failure(
            self._get_param("taskToken"),
            error=self._get_param("error"),
            cause=self._get_param("cause"),
        )
        return EmptyResult()

    patches.set(StepFunctionResponse, "send_task_failure", send_task_failure)


@fix("task_token_per_attempt", "notes row 9")
def _task_token_per_attempt(patches: Patches) -> None:
    """Each attempt of a ``.waitForTaskToken`` Task gets a new task token (AWS issues one per
    attempt, so a retry waits for a fresh callback). moto made the token once per state entry:
    the retry reused it and failed at once with the failure already stored for it."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.resource import (
        ResourceCondition,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_callback import (  # noqa: E501
        StateTaskServiceCallback,
    )

    original_eval_execution = StateTaskServiceCallback._eval_execution

    def uses_token(self: Any) -> bool:
        return (
            self._is_integration_pattern()
            and ResourceCondition.WaitForTaskToken in self._supported_integration_patterns
        )

    def eval_body(self: Any, env: Any) -> None:
        if uses_token(self):
            self._assert_integration_pattern_is_supported()
        super(StateTaskServiceCallback, self)._eval_body(env=env)
        env.states.context_object.context_object_data.pop("Task", None)

    def eval_execution(self: Any, env: Any) -> None:
        if uses_token(self):
            env.callback_pool_manager.add(env.states.context_object.update_task_token())
        original_eval_execution(self, env)

    patches.set(StateTaskServiceCallback, "_eval_body", eval_body)
    patches.set(StateTaskServiceCallback, "_eval_execution", eval_execution)


@fix("stop_blocked_task", "notes rows 10, 12")
def _stop_blocked_task(patches: Patches) -> None:
    """``StopExecution`` aborts an execution at once even while a Task is blocked (a running
    Lambda, a ``.waitForTaskToken`` callback): status ABORTED, an ``ExecutionAborted`` event with
    the given ``error``/``cause``, and later callbacks are refused. moto waited for the Task's
    own timeout (99999999 s by default), so the execution stayed RUNNING; it also dropped the
    stop's ``error``/``cause`` (row 12).

    The same blocked wait made the state machine's ``TimeoutSeconds`` set TIMED_OUT without the
    ``ExecutionTimedOut`` event, which the worker only wrote once the Task returned (row 10).
    The worker now wakes on the timeout and is given a moment to record the event before the
    status changes.

    An abandoned attempt still runs to its end in its own thread; the events it records then
    (``TaskSubmitted``, ``TaskSucceeded`` …) are dropped, because on AWS an execution's
    terminal event (``ExecutionSucceeded``/``Failed``/``Aborted``/``TimedOut``) is always its
    history's last."""
    from moto.core.responses import ActionResult
    from moto.stepfunctions.parser.api import HistoryEventType
    from moto.stepfunctions.parser.asl.component.eval_component import EvalComponent
    from moto.stepfunctions.parser.asl.component.program.program import Program
    from moto.stepfunctions.parser.asl.component.state.exec.execute_state import ExecutionState
    from moto.stepfunctions.parser.asl.eval.event.event_manager import EventManager
    from moto.stepfunctions.parser.utils import TMP_THREADS
    from moto.stepfunctions.responses import StepFunctionResponse

    from relayflow.local import timescale

    def evaluate_with_timeout(self: Any, env: Any) -> None:
        from moto.stepfunctions.parser.asl.component.common.timeouts.timeout import (
            EvalTimeoutError,
        )

        self.timeout.eval(env=env)
        timeout_seconds = env.stack.pop()

        frame = env.open_frame()
        frame.states.reset(input_value=env.states.get_input())
        frame.stack = copy.deepcopy(env.stack)
        outputs: list[Any] = []
        exceptions: list[Exception | None] = [None]
        done = threading.Event()

        def exec_and_notify() -> None:
            try:
                self._eval_execution(frame)
                outputs.extend(frame.stack)
            except Exception as ex:
                exceptions.append(ex)
            done.set()

        thread = threading.Thread(target=exec_and_notify, name=ATTEMPT_THREAD_NAME, daemon=True)
        TMP_THREADS.append(thread)
        thread.start()

        # A park's timeout is scaled like a Wait (timescale.task_timeout).
        limit = timescale.task_timeout(self.name, timeout_seconds)
        finished_on_time = timescale.wait_event(env, done, limit)
        frame.set_ended()
        env.close_frame(frame)
        if not env.is_running():
            # Stopped, timed out or failed elsewhere: abandon the attempt; the caller sees a
            # non-running program and leaves the state without output.
            return

        exception = exceptions.pop()
        if exception:
            raise exception
        if not finished_on_time:
            raise EvalTimeoutError()

        output = outputs.pop()
        env.stack.append(output)
        if not self._is_language_query_jsonpath():
            env.states.set_result(output)
        if self.assign_decl:
            self.assign_decl.eval(env=env)
        if self.result_selector:
            self.result_selector.eval(env=env)
        if self.result_path:
            self.result_path.eval(env)
        else:
            env.states.reset(input_value=env.stack.pop())

    def stop_execution(self: Any) -> Any:
        arn = self._get_param("executionArn")
        execution = self.stepfunction_backend.describe_execution(arn)
        now = datetime.datetime.now(datetime.UTC)
        worker = execution.exec_worker
        # A StopExecution right after StartExecution can find the worker still setting up
        # its environment (moto then crashed on env None): wait for it briefly, then stop
        # it, as Step Functions stops an execution that has only just started.
        for _ in range(200):
            if worker is None or getattr(worker, "env", None) is not None:
                break
            time.sleep(0.01)
        if worker is not None and getattr(worker, "env", None) is None:
            return ActionResult({"stopDate": execution.stop_date or now})
        if worker is not None and execution.status == "RUNNING":
            execution.stop(
                stop_date=now, error=self._get_param("error"), cause=self._get_param("cause")
            )
        return ActionResult({"stopDate": execution.stop_date or now})

    def program_eval(self: Any, env: Any) -> None:
        timeout = self.timeout_seconds.timeout_seconds if self.timeout_seconds else None
        env.next_state_name = self.start_at.start_at_name
        worker = threading.Thread(target=EvalComponent.eval, args=(self, env), daemon=True)
        TMP_THREADS.append(worker)
        worker.start()
        worker.join(timeout=timeout)
        if worker.is_alive():
            env.set_timed_out()
            worker.join(timeout=2.0)

    terminal_events = frozenset(
        {
            HistoryEventType.ExecutionSucceeded,
            HistoryEventType.ExecutionFailed,
            HistoryEventType.ExecutionAborted,
            HistoryEventType.ExecutionTimedOut,
        }
    )
    original_add_event = EventManager.add_event

    def add_event(self: Any, context: Any, event_type: Any, *args: Any, **kwargs: Any) -> int:
        # One lock per history makes "closed?" and the append one step: a late event can
        # never slip in after the terminal one (setdefault is atomic).
        with self.__dict__.setdefault(_HISTORY_LOCK_ATTR, threading.Lock()):
            if self.__dict__.get(_HISTORY_CLOSED_ATTR):
                return int(context.last_published_event_id or 0)
            event_id = int(original_add_event(self, context, event_type, *args, **kwargs))
            if event_type in terminal_events:
                self.__dict__[_HISTORY_CLOSED_ATTR] = True
            return event_id

    patches.set(ExecutionState, "_evaluate_with_timeout", evaluate_with_timeout)
    patches.set(Program, "eval", program_eval)
    patches.set(StepFunctionResponse, "stop_execution", stop_execution)
    patches.set(EventManager, "add_event", add_event)
