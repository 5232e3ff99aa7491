"""template.yaml for guest approval links: the signing secret, who may read it, and the two
public page routes."""

from __future__ import annotations

from stack import DEV, FUNCTIONS, RESOURCES, TEMPLATE

from relayflow.settings import Settings


def _secret_grants(logical_id: str) -> list[object]:
    policies = RESOURCES[logical_id]["Properties"].get("Policies") or []
    return [
        p["AWSSecretsManagerGetSecretValuePolicy"]["SecretArn"]
        for p in policies
        if isinstance(p, dict) and "AWSSecretsManagerGetSecretValuePolicy" in p
    ]


def test_the_signing_key_is_generated_outside_the_prefix_tool_steps_read():
    # Given the signing secret resource
    secret = RESOURCES["ApprovalSigningSecret"]
    assert secret["Type"] == "AWS::SecretsManager::Secret"
    props = secret["Properties"]
    # Then its value is generated (64 characters), never written in the template
    assert props["GenerateSecretString"]["PasswordLength"] >= 64
    assert "SecretString" not in props
    # And its name is not under the default SecretNamePrefix that tool steps may read
    name = DEV.resolve(props["Name"])
    assert name == "relayflow-internal/dev/approval-signing-key"
    prefix = DEV.resolve(TEMPLATE["Globals"]["Function"]["Environment"]["Variables"])[
        "RELAYFLOW_SECRET_NAME_PREFIX"
    ]
    assert prefix == "relayflow/dev/" and not name.startswith(prefix)


def test_the_api_function_verifies_links_with_that_secret_only():
    api = RESOURCES[FUNCTIONS["api"]]["Properties"]
    env = api["Environment"]["Variables"]
    assert env["RELAYFLOW_APPROVAL_SIGNING_SECRET"] == {"Ref": "ApprovalSigningSecret"}
    assert _secret_grants(FUNCTIONS["api"]) == [{"Ref": "ApprovalSigningSecret"}]
    assert "approval_signing_secret" in Settings.model_fields


def test_only_the_functions_that_sign_or_verify_read_the_key():
    readers = {
        kind
        for kind, logical_id in FUNCTIONS.items()
        if {"Ref": "ApprovalSigningSecret"} in _secret_grants(logical_id)
    }
    assert "api" in readers
    assert readers <= {"api", "approval"}


def test_the_guest_page_is_public_for_get_and_post_on_the_api_function():
    events = RESOURCES[FUNCTIONS["api"]]["Properties"]["Events"]
    guest = [e["Properties"] for e in events.values() if "guest" in e["Properties"]["Path"]]
    assert {(e["Path"], e["Method"]) for e in guest} == {
        ("/guest/approvals/{id}", "GET"),
        ("/guest/approvals/{id}", "POST"),
    }
    assert all(e["Auth"] == {"Authorizer": "NONE"} for e in guest)
