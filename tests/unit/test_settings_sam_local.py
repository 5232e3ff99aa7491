"""Settings under `sam local invoke`: what SAM cannot resolve never breaks a function."""

from __future__ import annotations

import pytest

from relayflow.settings import SAM_LOCAL_PLACEHOLDERS, Settings


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("FUNCTION_ARNS", "TABLE_NAME", "STATE_MACHINE_ROLE_ARN", "TRIGGER_FUNCTION_ARN"):
        monkeypatch.delenv(f"RELAYFLOW_{name}", raising=False)
    return monkeypatch


def test_blank_values_keep_the_defaults(env):
    # Given the blanks SAM gives values it cannot resolve (a !Sub of ARNs, a !GetAtt)
    env.setenv("RELAYFLOW_FUNCTION_ARNS", "")
    env.setenv("RELAYFLOW_TRIGGER_FUNCTION_ARN", "")
    # Then the settings load, with their defaults
    settings = Settings()
    assert settings.function_arns == {}
    assert settings.trigger_function_arn == Settings.model_fields["trigger_function_arn"].default


def test_logical_ids_and_placeholder_arns_keep_the_defaults(env):
    # Given what SAM resolves !Ref and !GetAtt …Arn to locally
    env.setenv("RELAYFLOW_TABLE_NAME", "RelayflowTable")
    env.setenv(
        "RELAYFLOW_STATE_MACHINE_ROLE_ARN",
        "arn:aws:lambda:us-east-1:123456789012:function:StateMachineRole",
    )
    settings = Settings()
    # Then each setting keeps its default instead of naming what does not exist
    assert settings.table_name == "relayflow"
    assert settings.state_machine_role_arn.startswith("arn:aws:iam::")


def test_real_values_are_kept(env):
    env.setenv("RELAYFLOW_TABLE_NAME", "relayflow-prod-RelayflowTable-1ABC")
    env.setenv("RELAYFLOW_FUNCTION_ARNS", '{"tool": "arn:aws:lambda:us-east-1:1:function:t"}')
    settings = Settings()
    assert settings.table_name == "relayflow-prod-RelayflowTable-1ABC"
    assert settings.function_arns == {"tool": "arn:aws:lambda:us-east-1:1:function:t"}


def test_a_malformed_value_is_a_clear_error_naming_the_variable(env):
    env.setenv("RELAYFLOW_FUNCTION_ARNS", "not json")
    with pytest.raises(ValueError, match="function_arns"):
        Settings()


def test_every_placeholder_names_a_setting():
    assert set(SAM_LOCAL_PLACEHOLDERS) <= set(Settings.model_fields)
