"""``relayflow serve --state DIR``: what the in-memory AWS holds, kept in a directory across a
restart (Temporal's dev server has ``--db-filename`` for the same reason).

:func:`capture` reads, through the AWS APIs (and moto's own objects where the API does not
say enough, such as a version's number), everything a restart would otherwise forget:

* every DynamoDB table with its items: workflows and their versions, runs, API keys,
  idempotency keys (a run's id is derived from its key), waits, parks, approvals, breakers,
  admission gates, the DLQ, journals;
* every Step Functions state machine with its versions (same numbers, same definitions) and
  aliases, and every execution: its description, its history and the definition it ran
  (:mod:`relayflow.local.compat_archive` answers for them after the restart);
* EventBridge Scheduler schedules (cron triggers, admission deadlines), the event buses'
  rules and targets (event triggers), Secrets Manager secrets (the approval links' signing
  key among them) and the S3 objects (offloaded payloads).

:class:`StateDir` writes it as one JSON document (``state.json``, mode 0600, in a 0700
directory; replaced atomically, so a crash leaves the previous save; :meth:`StateDir.open`
refuses a directory other users may write and removes a killed save's temporary file) and
reads it back;
:func:`restore` puts it into a fresh runtime. Runs that were under way when the server
stopped go on as :mod:`relayflow.local.revive` says.

The file holds the secrets in plain text, as the in-memory AWS did: keep it out of version
control.
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from relayflow.local.compat_archive import Archived, archived_arns

#: The layout of ``state.json``; a file of another format is refused, not guessed at.
FORMAT = 1
STATE_FILE = "state.json"
#: The prefix of a save's temporary file, renamed over :data:`STATE_FILE` once written.
TEMPORARY_PREFIX = ".state-"
#: ``CreateSchedule`` parameters that ``GetSchedule`` answers with.
_SCHEDULE_FIELDS = (
    "Name",
    "GroupName",
    "ScheduleExpression",
    "ScheduleExpressionTimezone",
    "StartDate",
    "EndDate",
    "Description",
    "State",
    "KmsKeyArn",
    "Target",
    "FlexibleTimeWindow",
    "ActionAfterCompletion",
)


class StateDirError(ValueError):
    """The state directory cannot be used (unreadable, or written by another format)."""


# -- the file -----------------------------------------------------------------------------------


def encoded(value: Any) -> Any:
    """JSON for ``value``: datetimes and bytes tagged so that :func:`_decode` restores them."""
    if isinstance(value, datetime.datetime):
        return {"$datetime": value.isoformat()}
    if isinstance(value, bytes | bytearray):
        return {"$bytes": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, dict):
        return {str(k): encoded(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [encoded(v) for v in value]
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if len(value) == 1 and "$datetime" in value:
            return datetime.datetime.fromisoformat(value["$datetime"])
        if len(value) == 1 and "$bytes" in value:
            return base64.b64decode(value["$bytes"])
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


class StateDir:
    """The directory ``serve --state`` keeps its state in (created, mode 0700, if missing)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    @property
    def file(self) -> Path:
        return self.path / STATE_FILE

    def open(self) -> None:
        """Make the directory fit to hold the state (secrets included) before the first load.

        Created with mode 0700 when missing. One that group or others may write is refused,
        naming its mode: another user could replace the saved state, or a save's temporary
        file, before the next start restores it. One of ours that they may only read or
        enter is made 0700 (one of another user's is refused). The temporary files of a save
        killed before its rename (``.state-*``) are removed: they hold a full copy of the
        state."""
        try:
            self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
            found = self.path.stat()
        except FileExistsError as exc:
            raise StateDirError(f"{self.path} is not a directory") from exc
        except OSError as exc:
            raise StateDirError(f"cannot use {self.path}: {exc.strerror}") from exc
        mode = stat.S_IMODE(found.st_mode)
        if mode & 0o022:
            raise StateDirError(
                f"{self.path} has mode {mode:04o}, which lets other users write into it: "
                f"chmod 700 it, or use another --state directory"
            )
        if mode & 0o077:
            if found.st_uid != os.geteuid():
                raise StateDirError(
                    f"{self.path} has mode {mode:04o} and belongs to another user: "
                    "use a directory of your own"
                )
            os.chmod(self.path, 0o700)
        for leftover in self.path.glob(f"{TEMPORARY_PREFIX}*"):
            leftover.unlink(missing_ok=True)

    def load(self) -> dict[str, Any] | None:
        """The saved state, or ``None`` when nothing was saved yet."""
        try:
            text = self.file.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StateDirError(f"cannot read {self.file}: {exc.strerror}") from exc
        try:
            document = json.loads(text)
        except ValueError as exc:
            raise StateDirError(f"{self.file} is not JSON ({exc}): move it away") from exc
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            found = document.get("format") if isinstance(document, dict) else None
            raise StateDirError(
                f"{self.file} has format {found!r}, this Relayflow reads format {FORMAT}: "
                "use another --state directory"
            )
        return dict(_decode(document))

    def save(self, captured: Captured) -> None:
        """Write ``captured`` (replacing the previous save in one rename)."""
        self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        executions = ",".join(
            f"{json.dumps(arn)}:{text}" for arn, text in captured.executions.items()
        )
        text = json.dumps(encoded(captured.state), separators=(",", ":"))
        text = text[:-1] + ',"executions":{' + executions + "}}"
        handle, temporary = tempfile.mkstemp(prefix=TEMPORARY_PREFIX, dir=self.path)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())  # on disk before it replaces the previous save
            os.chmod(temporary, 0o600)
            os.replace(temporary, self.file)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


# -- capture ------------------------------------------------------------------------------------


@dataclass
class CaptureCache:
    """What earlier captures read that has not changed since (a save every few seconds must
    not read and encode every execution again): the encoded JSON of each ended execution,
    and of each running one with the id of its last history event then."""

    ended: dict[str, str] = field(default_factory=dict)
    running: dict[str, tuple[int, str]] = field(default_factory=dict)


def capture(runtime: Any, server: dict[str, Any], cache: CaptureCache) -> Captured:
    """Everything :func:`restore` needs, read from ``runtime``. ``server``: the server's own
    facts (its bootstrap key, admin token)."""
    state = {
        "format": FORMAT,
        "saved_at": datetime.datetime.now(datetime.UTC).isoformat(),
        "server": server,
        "dynamodb": list(_tables(runtime)),
        "state_machines": list(_state_machines(runtime)),
        "schedules": list(_schedules(runtime)),
        "rules": list(_rules(runtime)),
        "secrets": list(_secrets(runtime)),
        "objects": list(_objects(runtime)),
    }
    return Captured(state, _executions(runtime, cache))


@dataclass
class Captured:
    """A capture: the state, and each execution as encoded JSON (see :class:`CaptureCache`)."""

    state: dict[str, Any]
    executions: dict[str, str]


def _pages(client: Any, operation: str, key: str, **params: Any) -> Iterator[Any]:
    """Every ``key`` entry of every page of ``operation`` (boto3's paginator)."""
    for page in client.get_paginator(operation).paginate(**params):
        yield from page.get(key, [])


def _tables(runtime: Any) -> Iterator[dict[str, Any]]:
    dynamodb = runtime.dynamodb_client
    for name in _pages(dynamodb, "list_tables", "TableNames"):
        table = dynamodb.describe_table(TableName=name)["Table"]
        yield {
            "name": name,
            "key_schema": table["KeySchema"],
            "attributes": table["AttributeDefinitions"],
            "indexes": [
                {k: index[k] for k in ("IndexName", "KeySchema", "Projection")}
                for index in table.get("GlobalSecondaryIndexes", [])
            ],
            "items": _items(runtime, name),
        }


def _items(runtime: Any, name: str) -> list[dict[str, Any]]:
    """Every item of table ``name``, as ``Scan`` answers them, read from moto's table (a
    ``Scan`` through the API spends most of a save turning items into its response)."""
    from moto.dynamodb.models import dynamodb_backends

    table = dynamodb_backends[runtime.account][runtime.region].get_table(name)
    for _ in range(10):
        try:
            return [_typed(item.to_json()["Attributes"]) for item in table.all_items()]
        except RuntimeError:  # a write changed the table under the read: read it again
            continue
    raise StateDirError(f"table {name} kept changing while it was read")


def _typed(attributes: dict[str, Any]) -> dict[str, Any]:
    """moto's attribute values as boto3's client gives them: binary as bytes (moto keeps the
    wire's base64 text)."""

    def value(typed: dict[str, Any]) -> dict[str, Any]:
        ((kind, raw),) = typed.items()
        if kind == "B":
            return {kind: raw if isinstance(raw, bytes) else base64.b64decode(raw)}
        if kind == "BS":
            return {kind: [v if isinstance(v, bytes) else base64.b64decode(v) for v in raw]}
        if kind == "M":
            return {kind: {k: value(v) for k, v in raw.items()}}
        if kind == "L":
            return {kind: [value(v) for v in raw]}
        return {kind: raw}

    return {name: value(typed) for name, typed in attributes.items()}


def _state_machines(runtime: Any) -> Iterator[dict[str, Any]]:
    sfn = runtime.sfn_client
    for machine in list(runtime.sfn_backend.state_machines):
        tags = sfn.list_tags_for_resource(resourceArn=machine.arn).get("tags", [])
        yield {
            "name": machine.name,
            "arn": machine.arn,
            **_machine_fields(machine),
            "revision_id": getattr(machine, "revision_id", None),
            "latest_version_number": machine.latest_version_number,
            "tags": tags,
            "versions": [
                {
                    "version": version.version,
                    "description": version.description,
                    "revision_id": getattr(version, "revision_id", None),
                    **_machine_fields(version),
                }
                for version in list(machine.versions.values())
            ],
            "aliases": [
                {
                    "name": alias.name,
                    "description": alias.description,
                    "routing": alias.routing_configuration,
                }
                for alias in list(machine.aliases.values())
            ],
        }


def _machine_fields(machine: Any) -> dict[str, Any]:
    return {
        "definition": machine.definition,
        "role_arn": machine.roleArn,
        "type": machine.type,
        "logging": machine.loggingConfiguration,
        "tracing": machine.tracingConfiguration,
        "encryption": machine.encryptionConfiguration,
    }


def _executions(runtime: Any, cache: CaptureCache) -> dict[str, str]:
    """Execution ARN → its description, history and definition (encoded JSON): moto's
    executions and the ones kept from before the last restart."""
    arns = [
        execution.execution_arn
        for machine in list(runtime.sfn_backend.state_machines)
        for execution in list(machine.executions)
    ]
    arns.extend(arn for arn in archived_arns() if arn not in arns)
    sfn = runtime.sfn_client
    captured: dict[str, str] = {}
    for arn in arns:
        if arn in cache.ended:
            captured[arn] = cache.ended[arn]
            continue
        last = sfn.get_execution_history(executionArn=arn, maxResults=1, reverseOrder=True)
        last_id = int(last["events"][0]["id"]) if last.get("events") else 0
        seen = cache.running.get(arn)
        if seen is not None and seen[0] == last_id:
            captured[arn] = seen[1]
            continue
        description = sfn.describe_execution(executionArn=arn)
        description.pop("ResponseMetadata", None)
        events = list(_pages(sfn, "get_execution_history", "events", executionArn=arn))
        machine = sfn.describe_state_machine_for_execution(executionArn=arn)
        machine.pop("ResponseMetadata", None)
        entry = {"description": description, "events": events, "machine": machine}
        text = json.dumps(encoded(entry), separators=(",", ":"))
        captured[arn] = text
        if description.get("status") == "RUNNING":
            last_seen = int(events[-1]["id"]) if events else 0
            cache.running[arn] = (last_seen, text)
        else:
            cache.running.pop(arn, None)
            cache.ended[arn] = text
    return captured


def _schedules(runtime: Any) -> Iterator[dict[str, Any]]:
    scheduler = runtime.client("scheduler")
    for group in _pages(scheduler, "list_schedule_groups", "ScheduleGroups"):
        for entry in _pages(scheduler, "list_schedules", "Schedules", GroupName=group["Name"]):
            found = scheduler.get_schedule(Name=entry["Name"], GroupName=group["Name"])
            yield {k: found[k] for k in _SCHEDULE_FIELDS if k in found}


def _rules(runtime: Any) -> Iterator[dict[str, Any]]:
    events = runtime.events_client
    for bus in events.list_event_buses().get("EventBuses", []):
        for rule in _pages(events, "list_rules", "Rules", EventBusName=bus["Name"]):
            targets = list(
                _pages(
                    events,
                    "list_targets_by_rule",
                    "Targets",
                    Rule=rule["Name"],
                    EventBusName=bus["Name"],
                )
            )
            fields = ("Name", "EventPattern", "ScheduleExpression", "State", "Description")
            yield {
                "bus": bus["Name"],
                "rule": {k: rule[k] for k in fields if k in rule},
                "targets": targets,
            }


def _secrets(runtime: Any) -> Iterator[dict[str, Any]]:
    manager = runtime.client("secretsmanager")
    for secret in _pages(manager, "list_secrets", "SecretList"):
        value = manager.get_secret_value(SecretId=secret["Name"])
        yield {
            "name": secret["Name"],
            "description": secret.get("Description"),
            **{k: value[k] for k in ("SecretString", "SecretBinary") if k in value},
        }


def _objects(runtime: Any) -> Iterator[dict[str, Any]]:
    s3 = runtime.s3_client
    for bucket in s3.list_buckets().get("Buckets", []):
        params: dict[str, Any] = {"Bucket": bucket["Name"]}
        while True:
            page = s3.list_objects_v2(**params)
            for entry in page.get("Contents", []):
                body = s3.get_object(Bucket=bucket["Name"], Key=entry["Key"])["Body"].read()
                yield {"bucket": bucket["Name"], "key": entry["Key"], "body": body}
            if not page.get("IsTruncated"):
                break
            params["ContinuationToken"] = page["NextContinuationToken"]


# -- restore ------------------------------------------------------------------------------------


def restore(runtime: Any, state: dict[str, Any]) -> dict[str, Archived]:
    """Put ``state`` (a :func:`capture`) into ``runtime``, a freshly opened one; returns the
    executions that were kept (ARN → :class:`Archived`), which the Step Functions API now
    answers for."""
    from relayflow.local import compat_archive

    _restore_tables(runtime, state.get("dynamodb", []))
    for machine in state.get("state_machines", []):
        _restore_machine(runtime, machine)
    _restore_schedules(runtime, state.get("schedules", []))
    _restore_rules(runtime, state.get("rules", []))
    _restore_secrets(runtime, state.get("secrets", []))
    _restore_objects(runtime, state.get("objects", []))
    executions = {
        arn: Archived(
            description=entry["description"],
            events=entry["events"],
            machine=entry.get("machine"),
        )
        for arn, entry in state.get("executions", {}).items()
    }
    compat_archive.archive(executions)
    return executions


def _restore_tables(runtime: Any, tables: list[dict[str, Any]]) -> None:
    dynamodb = runtime.dynamodb_client
    existing = set(_pages(dynamodb, "list_tables", "TableNames"))
    for table in tables:
        if table["name"] not in existing:
            extra = {"GlobalSecondaryIndexes": table["indexes"]} if table["indexes"] else {}
            dynamodb.create_table(
                TableName=table["name"],
                KeySchema=table["key_schema"],
                AttributeDefinitions=table["attributes"],
                BillingMode="PAY_PER_REQUEST",
                **extra,
            )
        items = table["items"]
        for start in range(0, len(items), 25):
            batch = [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
            dynamodb.batch_write_item(RequestItems={table["name"]: batch})


def _restore_machine(runtime: Any, saved: dict[str, Any]) -> None:
    """The state machine with its versions (numbers kept) and aliases, through moto's own
    objects: the API numbers versions itself and publishes nothing for an unchanged one."""
    from moto.stepfunctions.models import StateMachineAlias, StateMachineVersion

    backend = runtime.sfn_backend
    machine = backend.create_state_machine(
        name=saved["name"],
        definition=saved["definition"],
        roleArn=saved["role_arn"],
        tags=saved.get("tags") or None,
        loggingConfiguration=saved["logging"],
        tracingConfiguration=saved["tracing"],
        encryptionConfiguration=saved["encryption"],
        sm_type=saved["type"],
    )
    for entry in sorted(saved["versions"], key=lambda v: int(v["version"])):
        version = StateMachineVersion(
            source=machine, version=int(entry["version"]), description=entry["description"]
        )
        version.definition = entry["definition"]
        version.roleArn = entry["role_arn"]
        version.type = entry["type"]
        version.loggingConfiguration = entry["logging"]
        version.tracingConfiguration = entry["tracing"]
        version.encryptionConfiguration = entry["encryption"]
        version.revision_id = entry["revision_id"]
        machine.versions[version.version] = version
        machine.latest_version = version
    machine.latest_version_number = int(saved["latest_version_number"])
    machine.revision_id = saved["revision_id"]
    for entry in saved["aliases"]:
        machine.aliases[entry["name"]] = StateMachineAlias(
            name=entry["name"],
            statemachine_arn=machine.arn,
            routing_configuration=entry["routing"],
            description=entry["description"],
        )


def _restore_schedules(runtime: Any, schedules: list[dict[str, Any]]) -> None:
    scheduler = runtime.client("scheduler")
    groups = {g["Name"] for g in _pages(scheduler, "list_schedule_groups", "ScheduleGroups")}
    for schedule in schedules:
        group = schedule.get("GroupName") or "default"
        if group not in groups:
            scheduler.create_schedule_group(Name=group)
            groups.add(group)
        try:
            scheduler.create_schedule(**schedule)
        except scheduler.exceptions.ConflictException:
            continue


def _restore_rules(runtime: Any, rules: list[dict[str, Any]]) -> None:
    events = runtime.events_client
    buses = {bus["Name"] for bus in events.list_event_buses().get("EventBuses", [])}
    for entry in rules:
        if entry["bus"] not in buses:
            events.create_event_bus(Name=entry["bus"])
            buses.add(entry["bus"])
        events.put_rule(EventBusName=entry["bus"], **entry["rule"])
        if entry["targets"]:
            events.put_targets(
                Rule=entry["rule"]["Name"], EventBusName=entry["bus"], Targets=entry["targets"]
            )


def _restore_secrets(runtime: Any, secrets: list[dict[str, Any]]) -> None:
    manager = runtime.client("secretsmanager")
    for secret in secrets:
        value = {k: secret[k] for k in ("SecretString", "SecretBinary") if k in secret}
        try:
            manager.put_secret_value(SecretId=secret["name"], **value)
        except manager.exceptions.ResourceNotFoundException:
            described = {"Description": secret["description"]} if secret["description"] else {}
            manager.create_secret(Name=secret["name"], **described, **value)


def _restore_objects(runtime: Any, objects: list[dict[str, Any]]) -> None:
    s3 = runtime.s3_client
    buckets = {bucket["Name"] for bucket in s3.list_buckets().get("Buckets", [])}
    for entry in objects:
        if entry["bucket"] not in buckets:
            s3.create_bucket(Bucket=entry["bucket"])
            buckets.add(entry["bucket"])
        s3.put_object(Bucket=entry["bucket"], Key=entry["key"], Body=entry["body"])
