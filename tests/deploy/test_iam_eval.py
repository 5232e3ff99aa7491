"""The policy evaluator the tenant policy tests stand on (tests/deploy/iam_eval.py): it
denies what IAM denies, so a policy test over it can fail."""

from __future__ import annotations

import pytest
from iam_eval import Request, as_tenant, evaluate

TAG = "${aws:PrincipalTag/relayflow-tenant}"
ALLOW_OBJECTS = {
    "Effect": "Allow",
    "Action": ["s3:GetObject"],
    "Resource": f"arn:aws:s3:::app-*/{TAG}/*",
}


def test_an_allow_matches_only_its_action_and_resource():
    statements = [ALLOW_OBJECTS]
    own = "arn:aws:s3:::app-x/alpha/k"
    assert evaluate(statements, as_tenant("alpha", "s3:GetObject", own)) == "Allow"
    assert evaluate(statements, as_tenant("alpha", "S3:getobject", own)) == "Allow"
    denied = [
        as_tenant("alpha", "s3:PutObject", "arn:aws:s3:::app-x/alpha/k"),
        as_tenant("alpha", "s3:GetObject", "arn:aws:s3:::app-x/beta/k"),
        as_tenant("alpha", "s3:GetObject", "arn:aws:s3:::APP-x/alpha/k"),  # case-sensitive
        as_tenant("beta", "s3:GetObject", "arn:aws:s3:::app-x/alpha/k"),
        Request("s3:GetObject", "arn:aws:s3:::app-x/alpha/k"),  # no tag: the variable fails
    ]
    for request in denied:
        assert evaluate(statements, request) == "ImplicitDeny", request


def test_star_matches_slashes_too_which_is_the_leak_the_template_closes():
    # alpha's grant reaches beta's folder holding a folder named alpha
    request = as_tenant("alpha", "s3:GetObject", "arn:aws:s3:::app-x/beta/alpha/y")
    assert evaluate([ALLOW_OBJECTS], request) == "Allow"
    deny = {
        "Effect": "Deny",
        "Action": "s3:*",
        "Resource": f"arn:aws:s3:::app-*/*/{TAG}/*",
    }
    assert evaluate([ALLOW_OBJECTS, deny], request) == "Deny"
    own = as_tenant("alpha", "s3:GetObject", "arn:aws:s3:::app-x/alpha/y")
    assert evaluate([ALLOW_OBJECTS, deny], own) == "Allow"


def test_question_mark_is_one_character_and_escapes_are_literal():
    statement = {"Effect": "Allow", "Action": "sns:Publish", "Resource": "arn:t:?${*}"}
    assert evaluate([statement], Request("sns:Publish", "arn:t:a*")) == "Allow"
    assert evaluate([statement], Request("sns:Publish", "arn:t:ab")) == "ImplicitDeny"
    assert evaluate([statement], Request("sns:Publish", "arn:t:*")) == "ImplicitDeny"


def test_a_deny_wins_over_any_allow():
    allow = {"Effect": "Allow", "Action": "*", "Resource": "*"}
    deny = {"Effect": "Deny", "Action": "dynamodb:*", "Resource": "arn:aws:dynamodb:*:*:table/r*"}
    assert (
        evaluate([allow, deny], Request("dynamodb:GetItem", "arn:aws:dynamodb:r:1:table/rf"))
        == "Deny"
    )
    assert (
        evaluate([allow, deny], Request("s3:GetObject", "arn:aws:dynamodb:r:1:table/rf")) == "Allow"
    )


def test_not_action_and_not_resource_invert_the_match():
    statement = {"Effect": "Deny", "NotAction": "sqs:*", "NotResource": "arn:aws:sqs:*:*:app-*"}
    assert evaluate([statement], Request("sns:Publish", "arn:aws:sns:r:1:t")) == "Deny"
    assert evaluate([statement], Request("sqs:SendMessage", "arn:aws:sns:r:1:t")) == "ImplicitDeny"
    assert evaluate([statement], Request("sns:Publish", "arn:aws:sqs:r:1:app-q")) == "ImplicitDeny"


TAGGED = {
    "Effect": "Allow",
    "Action": "sqs:SendMessage",
    "Resource": "arn:aws:sqs:*:*:app-*",
    "Condition": {"StringEquals": {"aws:ResourceTag/relayflow-tenant": TAG}},
}


@pytest.mark.parametrize(
    ("tenant", "tag", "expected"),
    [
        ("alpha", "alpha", "Allow"),
        ("beta", "alpha", "ImplicitDeny"),
        ("alpha", None, "ImplicitDeny"),
    ],
)
def test_string_equals_substitutes_the_principal_tag(tenant, tag, expected):
    keys = {} if tag is None else {"resource_tag": tag}
    request = as_tenant(tenant, "sqs:SendMessage", "arn:aws:sqs:r:1:app-q", **keys)
    assert evaluate([TAGGED], request) == expected


LEADING = {
    "Effect": "Allow",
    "Action": "dynamodb:GetItem",
    "Resource": "arn:aws:dynamodb:*:*:table/app-*",
    "Condition": {
        "ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"{TAG}#*"]},
        "Null": {"dynamodb:LeadingKeys": "false"},
    },
}


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        (["alpha#1"], "Allow"),
        (["alpha#1", "alpha#2"], "Allow"),
        (["alpha#1", "beta#2"], "ImplicitDeny"),  # all values, not any
        (["alphabet#1"], "ImplicitDeny"),
        (None, "ImplicitDeny"),  # ForAllValues alone would hold: Null requires the key
    ],
)
def test_for_all_values_with_null_scopes_leading_keys(keys, expected):
    extra = {} if keys is None else {"leading_keys": keys}
    request = as_tenant("alpha", "dynamodb:GetItem", "arn:aws:dynamodb:r:1:table/app-t", **extra)
    assert evaluate([LEADING], request) == expected


def test_for_all_values_alone_holds_for_a_missing_key():
    only = {
        **LEADING,
        "Condition": {"ForAllValues:StringLike": LEADING["Condition"]["ForAllValues:StringLike"]},
    }
    request = as_tenant("alpha", "dynamodb:GetItem", "arn:aws:dynamodb:r:1:table/app-t")
    assert evaluate([only], request) == "Allow"


def test_string_like_negations_if_exists_and_arn_like():
    def one(operator: str, value: object, context: dict) -> str:
        statement = {
            "Effect": "Allow",
            "Action": "a:B",
            "Resource": "*",
            "Condition": {operator: {"k": value}},
        }
        return evaluate([statement], Request("a:B", "r", context))

    assert one("StringLike", "alpha/*", {"k": "alpha/x"}) == "Allow"
    assert one("StringLike", "alpha/*", {"k": "beta/x"}) == "ImplicitDeny"
    assert one("StringLike", "alpha/*", {}) == "ImplicitDeny"
    assert one("StringNotLike", "alpha/*", {"k": "beta/x"}) == "Allow"
    assert one("StringNotEquals", "x", {"k": "x"}) == "ImplicitDeny"
    assert one("StringEqualsIfExists", "x", {}) == "Allow"
    assert one("StringEqualsIfExists", "x", {"k": "y"}) == "ImplicitDeny"
    assert (
        one("ArnLike", "arn:aws:iam::1:role/relayflow-*", {"k": "arn:aws:iam::1:role/relayflow-x"})
        == "Allow"
    )
    assert (
        one("ArnLike", "arn:aws:iam::1:role/relayflow-*", {"k": "arn:aws:iam::1:user/x"})
        == "ImplicitDeny"
    )
    assert one("Bool", True, {"k": "true"}) == "Allow"
    assert one("Null", "true", {}) == "Allow"
    assert one("Null", "true", {"k": "v"}) == "ImplicitDeny"
    assert one("ForAnyValue:StringEquals", ["a", "b"], {"k": ["c", "b"]}) == "Allow"
    assert one("ForAnyValue:StringEquals", ["a", "b"], {}) == "ImplicitDeny"


def test_an_operator_it_cannot_read_is_an_error_not_a_verdict():
    statement = {
        "Effect": "Allow",
        "Action": "a:B",
        "Resource": "*",
        "Condition": {"NumericLessThan": {"k": "3"}},
    }
    with pytest.raises(ValueError, match="NumericLessThan"):
        evaluate([statement], Request("a:B", "r", {"k": "1"}))
