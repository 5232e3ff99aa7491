"""AWS failures as the control plane's API errors."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import ParamSpec, TypeVar

from relayflow.control.errors import (
    ApiError,
    BadRequest,
    Conflict,
    InvalidDefinition,
    PayloadTooLarge,
    ServiceUnavailable,
    TooManyRequests,
)
from relayflow.dal import DataAccessError, InvalidPageToken, ItemTooLarge
from relayflow.dal import Throttled as DalThrottled
from relayflow.executions import stepfunctions as sfn_api

P = ParamSpec("P")
R = TypeVar("R")


def translated(method: Callable[P, R]) -> Callable[P, R]:
    """Turn data-access and Step Functions failures into :class:`ApiError` s."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except ApiError:
            raise
        except (DalThrottled, sfn_api.Throttled) as exc:
            raise TooManyRequests("AWS is throttling requests; retry shortly") from exc
        except InvalidPageToken as exc:
            raise BadRequest(str(exc)) from exc
        except ItemTooLarge as exc:
            raise PayloadTooLarge("the item would exceed DynamoDB's 400 KB limit") from exc
        except (DataAccessError, sfn_api.StepFunctionsError) as exc:
            # The AWS error names tables and ARNs: it goes to the log, not to the caller.
            from relayflow.observability import logger

            logger.error("AWS call failed", extra={"error": type(exc).__name__, "reason": str(exc)})
            raise ServiceUnavailable(
                "the service could not reach its storage or Step Functions; retry shortly"
            ) from exc

    return wrapper


@contextlib.contextmanager
def trigger_errors() -> Iterator[None]:
    """Trigger sync's failures as API errors."""
    from relayflow.definition.problems import Problem
    from relayflow.triggers.sync import InvalidTriggers, SlugConflict, SyncFailed, SyncThrottled

    try:
        yield
    except InvalidTriggers as exc:
        raise InvalidDefinition.from_problems(
            [Problem(None, p.path, p.rule, p.message) for p in exc.problems]
        ) from exc
    except SlugConflict as exc:
        raise Conflict(str(exc), {"path": exc.path, "slug": exc.slug}) from exc
    except SyncThrottled as exc:
        raise TooManyRequests("AWS is throttling requests; retry shortly") from exc
    except SyncFailed as exc:
        from relayflow.observability import logger

        logger.error("trigger sync failed", extra={"reason": str(exc)})
        raise ServiceUnavailable(
            "the service could not register the workflow's triggers; repeat the request"
        ) from exc
