"""Per-tenant execution roles for state machines that start a templated ``sub_workflow``
target.

A templated target (``workflow_id: "{{ trigger.kind }}-handler"``) renders at run time into a
state machine ARN whose prefix up to ``relayflow-<stage>-<tenant>_`` is fixed at compile time,
so by construction it can only name a machine of the run's own tenant. IAM enforces the same:
such a workflow's machine runs under its tenant's role, ``relayflow-<stage>-tenant-<tenant>``,
tagged ``relayflow-tenant=<tenant>``, whose only policy is the stack's
``TenantStateMachinePolicy``. That policy allows ``states:StartExecution`` (and watching the
child) on ``relayflow-<stage>-${aws:PrincipalTag/relayflow-tenant}_*`` only, so the role can
start no other tenant's machine whatever the rendered id. The same policy is the role's
permissions boundary, and the API function may create roles only with that boundary and attach
only that policy (``template.yaml``), so no role it creates can do more.

The role is created the first time a workflow of the tenant needs it, and reused after. IAM is
eventually consistent: Step Functions may refuse a role for a few seconds after it was created
(:func:`relayflow.executions.stepfunctions.StateMachines.create` retries that refusal).
"""

from __future__ import annotations

import json
from typing import Any

from relayflow.adapters.port import AwsPort
from relayflow.definition.models import SubWorkflowStep, Workflow
from relayflow.executions.stepfunctions import StepFunctionsError

#: The tag that names a tenant role's tenant (read by the policy as aws:PrincipalTag).
TENANT_TAG = "relayflow-tenant"


class TenantRoleError(StepFunctionsError):
    """IAM refused to create or read a tenant role (the control plane answers it like any
    failure to set up a state machine: logged, 503)."""


def needs_tenant_role(workflow: Workflow) -> bool:
    """Whether ``workflow`` starts a templated ``sub_workflow`` target."""
    return any(
        isinstance(step, SubWorkflowStep) and "{{" in step.workflow_id
        for step in workflow.steps.values()
    )


def role_name(stage: str, tenant: str) -> str:
    """``relayflow-<stage>-tenant-<tenant>`` (at most 53 characters: tenant ids hold 31)."""
    return f"relayflow-{stage}-tenant-{tenant}"


def trust_policy(account: str) -> dict[str, Any]:
    """Step Functions of this account may assume the role."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "states.amazonaws.com"},
                "Action": "sts:AssumeRole",
                "Condition": {"StringEquals": {"aws:SourceAccount": account}},
            }
        ],
    }


class TenantRoles(AwsPort):
    """Tenant roles through IAM. ``client`` is a boto3 ``iam`` client (default:
    ``adapters.aws.client("iam")``, looked up at each call)."""

    service = "iam"

    def __init__(self, client: Any | None = None) -> None:
        super().__init__(client)
        self._known: dict[str, str] = {}

    def ensure(self, tenant: str, *, stage: str, policy_arn: str, account: str) -> str:
        """The ARN of ``tenant``'s role, created (with ``policy_arn`` as its boundary and its
        one policy) when it does not exist. A role of that name tagged for another tenant is
        refused."""
        from botocore.exceptions import ClientError

        name = role_name(stage, tenant)
        if name in self._known:
            return self._known[name]
        try:
            try:
                role = self.client.get_role(RoleName=name)["Role"]
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "NoSuchEntity":
                    raise
                role = self._create(name, tenant, policy_arn, account)
        except ClientError as exc:
            raise TenantRoleError(f"tenant role {name}: {exc}") from exc
        tags = {t["Key"]: t["Value"] for t in role.get("Tags") or []}
        if tags.get(TENANT_TAG) not in (None, tenant):
            raise TenantRoleError(f"role {name} is tagged for tenant {tags[TENANT_TAG]!r}")
        self._known[name] = str(role["Arn"])
        return self._known[name]

    def _create(self, name: str, tenant: str, policy_arn: str, account: str) -> dict[str, Any]:
        from botocore.exceptions import ClientError

        try:
            role = self.client.create_role(
                RoleName=name,
                AssumeRolePolicyDocument=json.dumps(trust_policy(account)),
                Description=f"Relayflow state machines of tenant {tenant} (templated sub_workflow)",
                PermissionsBoundary=policy_arn,
                Tags=[{"Key": TENANT_TAG, "Value": tenant}],
            )["Role"]
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "EntityAlreadyExists":
                raise
            role = self.client.get_role(RoleName=name)["Role"]  # a concurrent publish won
        self.client.attach_role_policy(RoleName=name, PolicyArn=policy_arn)
        role.setdefault("Tags", [{"Key": TENANT_TAG, "Value": tenant}])
        return dict(role)


_roles = TenantRoles()


def tenant_roles() -> TenantRoles:
    """The process's tenant roles (known roles are cached for its lifetime)."""
    return _roles
