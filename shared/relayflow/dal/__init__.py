"""Data access: the only package that touches DynamoDB (see ``docs/data-model.md``).

Importing it costs no boto3: the client and the (de)serializers load on first use.
"""

from relayflow.dal.breakers import BreakerDal as BreakerDal
from relayflow.dal.errors import (
    ConditionFailed,
    DataAccessError,
    InvalidPageToken,
    ItemTooLarge,
    SlugTaken,
    Throttled,
    TransactionConflict,
)
from relayflow.dal.flow import FlowDal as FlowDal
from relayflow.dal.items import (
    RUN_STATUSES,
    TERMINAL_STATUSES,
    ApiKeyItem,
    HookItem,
    KeyIdItem,
    RunItem,
    VersionItem,
    WorkflowItem,
)
from relayflow.dal.schema import create_table
from relayflow.dal.table import Dal, get_dal
from relayflow.dal.webhooks import WebhookDal as WebhookDal

__all__ = [
    "RUN_STATUSES",
    "TERMINAL_STATUSES",
    "ApiKeyItem",
    "ConditionFailed",
    "Dal",
    "DataAccessError",
    "HookItem",
    "InvalidPageToken",
    "ItemTooLarge",
    "KeyIdItem",
    "RunItem",
    "SlugTaken",
    "Throttled",
    "TransactionConflict",
    "VersionItem",
    "WorkflowItem",
    "create_table",
    "get_dal",
]
