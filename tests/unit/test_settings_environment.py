"""relayflow.settings reads the environment itself (no pydantic_settings): the same variables,
names and formats as before."""

from __future__ import annotations

import pytest

from relayflow.settings import Settings, environment_values


def test_each_field_is_read_from_its_prefixed_variable_in_any_case():
    # Given variables named as template.yaml and a shell might name them
    environ = {
        "RELAYFLOW_TABLE_NAME": "relayflow-prod-table",
        "relayflow_code_cpu_seconds": "7",
        "RELAYFLOW_SSRF_ALLOW": '["billing.internal", "10.0.0.0/8"]',
        "RELAYFLOW_FUNCTION_ARNS": '{"tool": "arn:aws:lambda:eu-west-1:1:function:t"}',
        "RELAYFLOW_NOT_A_SETTING": "ignored",
        "HOME": "/root",
    }
    # When the settings are read from them
    settings = Settings.model_validate(environment_values(Settings, environ))
    # Then each value has its field's type: text, a number, JSON lists and mappings
    assert settings.table_name == "relayflow-prod-table"
    assert settings.code_cpu_seconds == 7
    assert settings.ssrf_allow == ["billing.internal", "10.0.0.0/8"]
    assert settings.function_arns == {"tool": "arn:aws:lambda:eu-west-1:1:function:t"}


def test_the_region_is_lambdas_aws_region_and_not_a_prefixed_variable():
    values = environment_values(Settings, {"AWS_REGION": "eu-west-1", "RELAYFLOW_REGION": "x"})
    assert Settings.model_validate(values).region == "eu-west-1"
    assert Settings.model_validate(environment_values(Settings, {})).region == "us-east-1"


def test_given_values_win_over_the_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RELAYFLOW_STAGE", "prod")
    assert Settings().stage == "prod"
    assert Settings(stage="dev").stage == "dev"


def test_a_value_that_breaks_its_type_names_the_field(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RELAYFLOW_CODE_MEMORY_MB", "lots")
    with pytest.raises(ValueError, match="code_memory_mb"):
        Settings()
    monkeypatch.setenv("RELAYFLOW_CODE_MEMORY_MB", "")
    assert Settings().code_memory_mb == Settings.model_fields["code_memory_mb"].default
