"""The vocabulary :mod:`workflow_strategies` draws definitions from: trigger and run paths,
expressions and conditions, models, HTTP methods, code bodies, AWS tools, error names, user
text, keys and numbers, and the limits at the edge of what validation accepts."""

from __future__ import annotations

import string
from typing import Any

from hypothesis import strategies as st

#: The trigger a runnable definition's templates read (every path they name exists in it).
RUNNABLE_TRIGGER: dict[str, Any] = {
    "name": "ada",
    "count": 3,
    "flag": True,
    "items": [1, 2, 3],
    "when": "2020-01-01T00:00:00Z",
    "wait": 1,
    "nested": {"value": "x", "list": ["a", "b"]},
}
TRIGGER_PATHS = (
    "trigger",
    "trigger.name",
    "trigger.count",
    "trigger.flag",
    "trigger.items",
    "trigger.nested",
    "trigger.nested.value",
    "trigger.nested.list",
)
RUN_PATHS = ("run.id", "run.workflow_id", "run.tenant", "run.started_at")
#: CEL expressions with no native form (they make a transform or condition run its Lambda).
LAMBDA_EXPRESSIONS = (
    "trigger.count * 2",
    "trigger.name + '!'",
    "size(trigger.items)",
    "trigger.count > 1 ? 'many' : 'few'",
    "[trigger.count, trigger.count + 1]",
)
NATIVE_CONDITIONS = (
    "trigger.count > 2",
    "trigger.flag",
    "trigger.name == 'ada'",
    "!(trigger.count <= 1)",
    "trigger.name.startsWith('a') && trigger.count >= 1",
    "trigger.count in [1, 2, 3]",
    "has(trigger.nested.value) || trigger.flag == false",
)
LAMBDA_CONDITIONS = (
    "size(trigger.items) > 1",
    "trigger.count * 2 > 5",
    "trigger.items.exists(x, x > 2)",
)
#: wait_for_event matches: CEL over the run's data and the awaited event.
WAIT_MATCHES = (
    "event.detail.order_id == trigger.order_id",
    "event.source == 'billing' && size(event.detail) > 0",
    "trigger.count in [1, 2, 3]",
)
AGENT_MODELS = (
    "bedrock:anthropic.claude-3-5-haiku-20241022-v1:0",
    "anthropic:claude-haiku-4-5",
    "openai:gpt-4o-mini",
    "scripted:triage",
)
BATCH_MODELS = (
    "bedrock:anthropic.claude-3-5-haiku-20241022-v1:0",
    "anthropic:claude-haiku-4-5",
    "openai:gpt-4o-mini",
    "scripted:summaries",
)
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
CODE_BODIES = ("return input", "return {'n': len(str(trigger))}", "return 1")
AWS_TOOLS: dict[str, tuple[str, ...]] = {
    "aws.dynamodb.put_item": ("table", "item"),
    "aws.sqs.send_message": ("queue_url", "body"),
    "aws.sns.publish": ("topic_arn", "message"),
    "aws.s3.put_object": ("bucket", "key", "body"),
}
ERROR_NAMES = (
    "Relayflow.Transient",
    "Relayflow.Throttled",
    "States.Timeout",
    "States.TaskFailed",
    "Custom.Error_1",
)
#: Text without ``{``, ``}`` or ``\\`` (those start template syntax); quotes, ``$``, dots,
#: spaces and non-ASCII letters stay in.
TEXT = st.text(
    alphabet=st.characters(
        codec="utf-8", exclude_categories=("Cs", "Cc"), exclude_characters="{}\\"
    ),
    max_size=12,
)
KEY_TEXT = st.one_of(
    st.text(alphabet=string.ascii_letters + string.digits + "_-. $", min_size=1, max_size=10),
    TEXT.filter(bool),
)
#: User object keys; ``.$`` suffixes are valid user data and must survive compilation.
USER_KEYS = st.one_of(KEY_TEXT, KEY_TEXT, KEY_TEXT, KEY_TEXT.map(lambda k: f"{k}.$"), st.just("$"))


def finite_numbers() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.integers(-(2**63), 2**63),
        st.floats(allow_nan=False, allow_infinity=False),
    )


#: Values at the edge of what validation accepts today (non-finite numbers, delays past
#: Step Functions' limit, timestamps that only match the pattern) are drawn about once in
#: RARE times, so that most of the corpus stays valid when validation refuses them.
RARE = 25
#: Step Functions' longest Wait, and a delay longer than any run may last (a year): drawn
#: often enough that every corpus holds valid long delays.
MAX_WAIT_SECONDS = 99_999_999
LONG_DELAY = 31_536_001
