"""The data-access layer: the only code that reads or writes the Relayflow table.

One method per access pattern (``docs/data-model.md`` lists them). Every tenant-owned read
and write builds its key from the tenant it is given. Every ``ClientError`` becomes a
:mod:`relayflow.dal.errors` exception. boto3 is imported on first use, and the DynamoDB client
comes from :func:`relayflow.adapters.aws.client` unless one is injected.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache
from typing import Any, TypeVar

from relayflow.dal import keys
from relayflow.dal.codec import (
    alias_names,
    decode_token,
    deserialize,
    encode_token,
    expression_parts,
    serialize,
    translate_error,
)
from relayflow.dal.errors import (
    ConditionFailed,
    SlugTaken,
)
from relayflow.dal.items import (
    KEY_ATTRIBUTES,
    ApiKeyItem,
    HookItem,
    KeyIdItem,
    RunItem,
    VersionItem,
    WorkflowItem,
)
from relayflow.dal.schema import GSI1

ItemT = TypeVar("ItemT")

#: Items one Query reads while filling a filtered page, and the most one page may examine.
_QUERY_PAGE = 100
_MAX_EXAMINED = 1000


def _utc_now() -> str:
    """ISO-8601 UTC to the millisecond with ``Z`` (the format of every time in the table)."""
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Dal:
    """Reads and writes of the Relayflow table.

    ``client`` is a boto3 DynamoDB client (default: ``adapters.aws.client("dynamodb")``, looked
    up at each call so a warm Lambda or a new local runtime always gets the current one);
    ``table_name`` defaults to ``settings.table_name``.
    """

    def __init__(self, client: Any | None = None, table_name: str | None = None) -> None:
        self._client = client
        self._table_name = table_name

    @property
    def client(self) -> Any:
        if self._client is not None:
            return self._client
        from relayflow.adapters.aws import client

        return client("dynamodb")

    @property
    def table_name(self) -> str:
        if self._table_name:
            return self._table_name
        from relayflow.settings import get_settings

        return get_settings().table_name

    # -- primitives --------------------------------------------------------------------------
    # The one implementation of each kind of request; the other DAL modules call these.

    def call(self, action: str, **params: Any) -> dict[str, Any]:
        """One client request; a ``ClientError`` becomes its :mod:`relayflow.dal.errors` type."""
        from botocore.exceptions import ClientError

        try:
            return dict(getattr(self.client, action)(**params))
        except ClientError as exc:
            raise translate_error(exc, action) from exc

    def get(self, key: keys.Key) -> dict[str, Any] | None:
        """The item at ``key`` (a strongly consistent read), or ``None``."""
        response = self.call(
            "get_item", TableName=self.table_name, Key=serialize(key), ConsistentRead=True
        )
        raw = response.get("Item")
        return deserialize(raw) if raw else None

    def put(self, item: Mapping[str, Any], condition: str | None = None, **extra: Any) -> None:
        """Write ``item`` (plain values); ``extra`` are further ``PutItem`` parameters."""
        params: dict[str, Any] = {"TableName": self.table_name, "Item": serialize(item)}
        if condition:
            params["ConditionExpression"] = condition
        params.update(extra)
        self.call("put_item", **params)

    def put_if(
        self,
        item: Mapping[str, Any],
        condition: str,
        values: Mapping[str, Any] | None = None,
        *,
        names: Mapping[str, str] | None = None,
        return_old: bool = False,
    ) -> dict[str, Any] | None:
        """Write ``item`` while ``condition`` holds: ``None`` when it did not, else the item it
        replaced (``{}`` when there was none, or unless ``return_old``). ``names`` defaults to
        the condition's ``#name`` aliases of ``name`` (:func:`alias_names`)."""
        params: dict[str, Any] = {
            "TableName": self.table_name,
            "Item": serialize(item),
            "ConditionExpression": condition,
            **expression_parts(names, values, condition),
        }
        if return_old:
            params["ReturnValues"] = "ALL_OLD"
        try:
            response = self.call("put_item", **params)
        except ConditionFailed:
            return None
        old = response.get("Attributes")
        return deserialize(old) if old else {}

    def delete(self, key: keys.Key) -> None:
        """Delete the item at ``key`` (nothing happens when there is none)."""
        self.call("delete_item", TableName=self.table_name, Key=serialize(key))

    def delete_if(
        self,
        key: keys.Key,
        condition: str,
        values: Mapping[str, Any],
        *,
        names: Mapping[str, str] | None = None,
    ) -> bool:
        """Delete the item at ``key`` while ``condition`` holds; whether it did. ``names`` as
        :meth:`put_if`."""
        try:
            self.call(
                "delete_item",
                TableName=self.table_name,
                Key=serialize(key),
                ConditionExpression=condition,
                **expression_parts(names, values, condition),
            )
        except ConditionFailed:
            return False
        return True

    def update_if(
        self,
        key: keys.Key,
        expression: str,
        condition: str,
        values: Mapping[str, Any],
        *,
        names: Mapping[str, str] | None = None,
    ) -> dict[str, Any] | None:
        """One conditional ``UpdateItem`` written out: the item afterwards, or ``None`` when
        the condition did not hold. ``names`` as :meth:`put_if` (both expressions')."""
        try:
            response = self.call(
                "update_item",
                TableName=self.table_name,
                Key=serialize(key),
                UpdateExpression=expression,
                ConditionExpression=condition,
                **expression_parts(names, values, expression, condition),
                ReturnValues="ALL_NEW",
            )
        except ConditionFailed:
            return None
        return deserialize(response["Attributes"])

    def update(
        self,
        key: keys.Key,
        *,
        set_values: Mapping[str, Any] | None = None,
        remove: tuple[str, ...] = (),
        condition: str | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``SET``/``REMOVE`` attributes (names are aliased, so reserved words are fine); a
        ``None`` value removes its attribute. Returns the item as it is afterwards."""
        names: dict[str, str] = {}
        vals: dict[str, Any] = dict(values or {})
        clauses = []
        sets = []
        remove = (*remove, *(a for a, v in (set_values or {}).items() if v is None))
        present = {a: v for a, v in (set_values or {}).items() if v is not None}
        for i, (attr, value) in enumerate(present.items()):
            names[f"#s{i}"] = attr
            vals[f":s{i}"] = value
            sets.append(f"#s{i} = :s{i}")
        if sets:
            clauses.append("SET " + ", ".join(sets))
        if remove:
            for i, attr in enumerate(remove):
                names[f"#r{i}"] = attr
            clauses.append("REMOVE " + ", ".join(f"#r{i}" for i in range(len(remove))))
        params: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": serialize(key),
            "UpdateExpression": " ".join(clauses),
            "ReturnValues": "ALL_NEW",
        }
        if condition:
            params["ConditionExpression"] = condition
            # Conditions name their attributes as #status, #pk … (see the callers).
            names.update(alias_names(condition))
        if names:
            params["ExpressionAttributeNames"] = names
        if vals:
            params["ExpressionAttributeValues"] = serialize(vals)
        return deserialize(self.call("update_item", **params)["Attributes"])

    def update_existing(self, key: keys.Key, values: Mapping[str, Any]) -> dict[str, Any]:
        """:meth:`update` of an item that must exist (:class:`ConditionFailed` when it does
        not); the item afterwards."""
        return self.update(key, set_values=values, condition="attribute_exists(#pk)")

    def query_pages(
        self,
        *,
        partition: str,
        index: str | None = None,
        sort_prefix: str | None = None,
        forward: bool = True,
        start: dict[str, Any] | None = None,
        limit: int | None = None,
        filter_expression: str | None = None,
        filter_values: Mapping[str, Any] | None = None,
        consistent: bool = False,
    ) -> Iterator[dict[str, Any]]:
        """The Query responses over one partition, page after page, in key order
        (``consistent``: a strongly consistent read, on the table only)."""
        hash_attr = "gsi1pk" if index else "pk"
        range_attr = "gsi1sk" if index else "sk"
        expression = "#h = :h"
        names = {"#h": hash_attr}
        values: dict[str, Any] = {":h": partition, **(filter_values or {})}
        if sort_prefix is not None:
            expression += " AND begins_with(#r, :r)"
            names["#r"] = range_attr
            values[":r"] = sort_prefix
        params: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": expression,
            "ScanIndexForward": forward,
        }
        if index:
            params["IndexName"] = index
        if limit:
            params["Limit"] = limit
        if consistent:
            params["ConsistentRead"] = True
        if filter_expression:
            params["FilterExpression"] = filter_expression
            names.update(alias_names(filter_expression))
        params["ExpressionAttributeNames"] = names
        params["ExpressionAttributeValues"] = serialize(values)
        while True:
            if start:
                params["ExclusiveStartKey"] = start
            response = self.call("query", **params)
            yield response
            start = response.get("LastEvaluatedKey")
            if not start:
                return

    def query(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        """Every item of one partition (plain values), in key order; ``kwargs`` as
        :meth:`query_pages`."""
        for response in self.query_pages(**kwargs):
            for raw in response.get("Items", []):
                yield deserialize(raw)

    def query_items(
        self,
        partition: str,
        sort_prefix: str | None = None,
        *,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """The items of one table partition (a strongly consistent Query), in key order, read
        page by page until the partition ends or a page brings the count to ``limit`` (each
        request asks for at most ``limit``)."""
        found: list[dict[str, Any]] = []
        pages = self.query_pages(
            partition=partition, sort_prefix=sort_prefix or None, limit=limit, consistent=True
        )
        for response in pages:
            found.extend(deserialize(raw) for raw in response["Items"])
            if limit is not None and len(found) >= limit:
                break
        return found

    def due_items(
        self,
        partition: str,
        parse: Callable[[dict[str, Any]], ItemT],
        due_of: Callable[[ItemT], str],
        now_iso: str,
        limit: int,
    ) -> list[ItemT]:
        """The first ``limit`` items of a partition of due markers (sort keys start with their
        ISO-8601 UTC time) whose time is at or before ``now_iso``, oldest first."""
        found: list[ItemT] = []
        for raw in self.query(partition=partition):
            item = parse(raw)
            if due_of(item) > now_iso or len(found) >= limit:
                break
            found.append(item)
        return found

    def transact_if(self, items: list[dict[str, Any]]) -> bool:
        """One ``TransactWriteItems`` on this table (each action's ``TableName`` is set here);
        ``False`` when a condition failed (nothing was written)."""
        for item in items:
            next(iter(item.values()))["TableName"] = self.table_name
        try:
            self.call("transact_write_items", TransactItems=items)
        except ConditionFailed:
            return False
        return True

    def page(
        self,
        parse: Callable[[dict[str, Any]], ItemT],
        *,
        partition: str,
        limit: int,
        next_token: str | None,
        forward: bool,
        status: str | None = None,
    ) -> tuple[list[ItemT], str | None]:
        """One page of a GSI1 partition: up to ``limit`` items (with ``status``, only the items
        of that ``status``) and the token of the next page (``None`` when there is none). A
        filtered page reads at most
        :data:`_MAX_EXAMINED` items; when they hold fewer matches the page is short and still
        carries a token."""
        start = decode_token(next_token, partition, KEY_ATTRIBUTES) if next_token else None
        filter_expression = "#status = :status" if status else None
        items: list[ItemT] = []
        last_key: dict[str, Any] | None = None
        examined = 0
        pages = self.query_pages(
            partition=partition,
            index=GSI1,
            forward=forward,
            start=start,
            limit=_QUERY_PAGE if filter_expression else limit + 1,
            filter_expression=filter_expression,
            filter_values={":status": status} if status else None,
        )
        for response in pages:
            for raw in response.get("Items", []):
                if len(items) == limit and last_key is not None:
                    # One more item exists: the page ends at the previous one.
                    return items, encode_token(last_key)
                items.append(parse(deserialize(raw)))
                last_key = {k: raw[k] for k in KEY_ATTRIBUTES}
            examined += int(response.get("ScannedCount", 0))
            following = response.get("LastEvaluatedKey")
            if following and examined >= _MAX_EXAMINED:
                if len(items) == limit and last_key is not None:
                    return items, encode_token(last_key)
                return items, encode_token(following)
        return items, None

    # -- API keys ----------------------------------------------------------------------------

    def put_api_key(self, item: ApiKeyItem) -> None:
        """Store a new key and its id pointer together (ConditionFailed if either exists)."""
        pointer = KeyIdItem(key_id=item.key_id, tenant=item.tenant, key_hash=item.key_hash)
        self.call(
            "transact_write_items",
            TransactItems=[
                {
                    "Put": {
                        "TableName": self.table_name,
                        "Item": serialize(record.to_item()),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                }
                for record in (item, pointer)
            ],
        )

    def get_api_key(self, key_hash: str) -> ApiKeyItem | None:
        raw = self.get(keys.api_key_key(key_hash))
        return ApiKeyItem.from_item(raw) if raw else None

    def get_api_key_by_id(self, key_id: str) -> ApiKeyItem | None:
        pointer = self.get(keys.key_id_key(key_id))
        if not pointer:
            return None
        return self.get_api_key(KeyIdItem.from_item(pointer).key_hash)

    def revoke_api_key(self, key_hash: str, revoked_at: str) -> ApiKeyItem:
        """Mark a key revoked (a second revocation keeps the first time)."""
        response = self.call(
            "update_item",
            TableName=self.table_name,
            Key=serialize(keys.api_key_key(key_hash)),
            UpdateExpression="SET revoked_at = if_not_exists(revoked_at, :now)",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues=serialize({":now": revoked_at}),
            ReturnValues="ALL_NEW",
        )
        return ApiKeyItem.from_item(deserialize(response["Attributes"]))

    def list_api_keys(self, tenant: str) -> list[ApiKeyItem]:
        rows = self.query(partition=keys.api_keys_partition(tenant), index=GSI1)
        return [ApiKeyItem.from_item(plain) for plain in rows]

    # -- workflows ---------------------------------------------------------------------------

    def get_workflow(self, tenant: str, workflow_id: str) -> WorkflowItem | None:
        raw = self.get(keys.workflow_key(tenant, workflow_id))
        return WorkflowItem.from_item(raw) if raw else None

    def get_workflow_with_versions(
        self, tenant: str, workflow_id: str
    ) -> tuple[WorkflowItem | None, list[VersionItem]]:
        """The head item and every version (oldest first), in one query of the partition."""
        head: WorkflowItem | None = None
        versions: list[VersionItem] = []
        for plain in self.query(partition=keys.workflow_partition(tenant, workflow_id)):
            sk = str(plain.get("sk", ""))
            if sk == keys.WORKFLOW_SK:
                head = WorkflowItem.from_item(plain)
            elif sk.startswith(keys.VERSION_SK_PREFIX):
                versions.append(VersionItem.from_item(plain))
        return head, versions

    def get_version(self, tenant: str, workflow_id: str, version: int) -> VersionItem | None:
        raw = self.get(keys.version_key(tenant, workflow_id, version))
        return VersionItem.from_item(raw) if raw else None

    def set_step_through_version(
        self, tenant: str, workflow_id: str, version: int, arn: str
    ) -> VersionItem:
        """Record the step-through variant of a version: the one field a version item gains
        after it was written (ConditionFailed when the version does not exist)."""
        raw = self.update_existing(
            keys.version_key(tenant, workflow_id, version), {"step_through_version_arn": arn}
        )
        return VersionItem.from_item(raw)

    def set_rerun_version(
        self, tenant: str, workflow_id: str, version: int, arn: str
    ) -> VersionItem:
        """Record the rerun variant of a version (ConditionFailed when it does not exist)."""
        raw = self.update_existing(
            keys.version_key(tenant, workflow_id, version), {"rerun_version_arn": arn}
        )
        return VersionItem.from_item(raw)

    def save_workflow(
        self,
        workflow: WorkflowItem,
        *,
        expected_latest: int | None,
        version: VersionItem | None = None,
    ) -> None:
        """Write the head item (and a new version, atomically). ``expected_latest`` is the
        ``latest_version`` the caller read (``None``: the workflow must not exist yet); a
        concurrent change makes this raise :class:`ConditionFailed`."""
        if expected_latest is None:
            head: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(pk)"}
        else:
            head = {
                "ConditionExpression": "latest_version = :expected",
                "ExpressionAttributeValues": serialize({":expected": expected_latest}),
            }
        writes = [{"Put": {"TableName": self.table_name, "Item": serialize(workflow.to_item())}}]
        writes[0]["Put"].update(head)
        if version is not None:
            writes.append(
                {
                    "Put": {
                        "TableName": self.table_name,
                        "Item": serialize(version.to_item()),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                }
            )
        self.call("transact_write_items", TransactItems=writes)

    def update_workflow(self, tenant: str, workflow_id: str, **values: Any) -> WorkflowItem:
        """Set attributes of an existing workflow (ConditionFailed when it does not exist)."""
        return WorkflowItem.from_item(
            self.update_existing(keys.workflow_key(tenant, workflow_id), values)
        )

    def list_workflows(
        self, tenant: str, *, limit: int, next_token: str | None
    ) -> tuple[list[WorkflowItem], str | None]:
        """A tenant's workflows by id."""
        return self.page(
            WorkflowItem.from_item,
            partition=keys.workflows_partition(tenant),
            limit=limit,
            next_token=next_token,
            forward=True,
        )

    # -- runs --------------------------------------------------------------------------------

    def create_run(self, run: RunItem) -> bool:
        """Write a new run; ``False`` when a run with that id already exists."""
        try:
            self.put(run.to_item(), condition="attribute_not_exists(pk)")
        except ConditionFailed:
            return False
        return True

    def get_run(self, tenant: str, run_id: str) -> RunItem | None:
        raw = self.get(keys.run_key(tenant, run_id))
        return RunItem.from_item(raw) if raw else None

    def update_run(
        self,
        tenant: str,
        run_id: str,
        values: Mapping[str, Any],
        *,
        remove: tuple[str, ...] = (),
        if_status: tuple[str, ...] = (),
        unless_set: str | None = None,
    ) -> RunItem | None:
        """Set attributes of an existing run. With ``if_status``, only while its status is
        one of them; with ``unless_set``, only while that attribute is absent or null.
        Returns the run afterwards, or ``None`` when a condition did not hold."""
        conditions = ["attribute_exists(#pk)"]
        condition_values: dict[str, Any] = {}
        if if_status:
            placeholders = []
            for i, status in enumerate(if_status):
                condition_values[f":st{i}"] = status
                placeholders.append(f":st{i}")
            conditions.append(f"#status IN ({', '.join(placeholders)})")
        if unless_set:
            condition_values[":null"] = None
            conditions.append(f"(attribute_not_exists(#{unless_set}) OR #{unless_set} = :null)")
        try:
            raw = self.update(
                keys.run_key(tenant, run_id),
                set_values=values,
                remove=remove,
                condition=" AND ".join(conditions),
                values=condition_values,
            )
        except ConditionFailed:
            return None
        return RunItem.from_item(raw)

    def delete_run(self, tenant: str, run_id: str) -> None:
        """Delete a run that never started (its execution could not be created)."""
        self.delete(keys.run_key(tenant, run_id))

    def list_runs(
        self,
        tenant: str,
        workflow_id: str,
        *,
        status: str | None,
        limit: int,
        next_token: str | None,
    ) -> tuple[list[RunItem], str | None]:
        """A workflow's runs, newest first, optionally of one status."""
        return self.page(
            RunItem.from_item,
            partition=keys.runs_partition(tenant, workflow_id),
            limit=limit,
            next_token=next_token,
            forward=False,
            status=status,
        )

    # -- webhook slugs -----------------------------------------------------------------------

    def put_hook(
        self,
        slug: str,
        tenant: str,
        workflow_id: str,
        trigger_index: int,
        enabled: bool,
        *,
        now: str | None = None,
    ) -> HookItem:
        """Register ``slug`` for the tenant's workflow (or update its registration).

        A slug belongs to one workflow at a time: registered to another tenant, or to another
        of the tenant's workflows that is still enabled, it raises :class:`SlugTaken`. A
        disabled registration of the same tenant (its workflow was deleted) is taken over.
        """
        when = now or _utc_now()
        index = {
            "gsi1pk": keys.hooks_partition(tenant, workflow_id),
            "gsi1sk": slug,
        }
        values = {
            "slug": slug,
            "tenant": tenant,
            "workflow_id": workflow_id,
            "trigger_index": trigger_index,
            "enabled": enabled,
            "type": HookItem.kind,
            "updated_at": when,
            **index,
        }
        names = {f"#a{i}": attr for i, attr in enumerate(values)}
        sets = [f"#a{i} = :a{i}" for i in range(len(values))]
        params = {f":a{i}": value for i, value in enumerate(values.values())}
        names.update({"#pk": "pk", "#created_at": "created_at", "#enabled": "enabled"})
        names.update({"#tenant": "tenant", "#workflow_id": "workflow_id"})
        params.update({":tenant": tenant, ":workflow_id": workflow_id, ":false": False})
        try:
            response = self.call(
                "update_item",
                TableName=self.table_name,
                Key=serialize(keys.hook_key(slug)),
                UpdateExpression="SET "
                + ", ".join([*sets, "#created_at = if_not_exists(#created_at, :a_now)"]),
                ConditionExpression="attribute_not_exists(#pk) OR (#tenant = :tenant AND "
                "(#workflow_id = :workflow_id OR #enabled = :false))",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=serialize({**params, ":a_now": when}),
                ReturnValues="ALL_NEW",
            )
        except ConditionFailed as exc:
            raise SlugTaken(slug, f"webhook slug {slug!r} belongs to another workflow") from exc
        return HookItem.from_item(deserialize(response["Attributes"]))

    def get_hook(self, slug: str) -> HookItem | None:
        """The registration of ``slug`` (any tenant's: the webhook route has no tenant)."""
        raw = self.get(keys.hook_key(slug))
        return HookItem.from_item(raw) if raw else None

    def delete_hook(self, slug: str, tenant: str, *, workflow_id: str | None = None) -> bool:
        """Remove the tenant's registration of ``slug`` (only while it is ``workflow_id``'s,
        when given); ``False`` when it is not theirs (or does not exist)."""
        condition = "#tenant = :tenant"
        values: dict[str, Any] = {":tenant": tenant}
        if workflow_id is not None:
            condition += " AND #workflow_id = :workflow_id"
            values[":workflow_id"] = workflow_id
        return self.delete_if(keys.hook_key(slug), condition, values)

    def list_hooks(self, tenant: str, workflow_id: str) -> list[HookItem]:
        """The slugs registered for the tenant's workflow, by slug."""
        rows = self.query(partition=keys.hooks_partition(tenant, workflow_id), index=GSI1)
        return [HookItem.from_item(plain) for plain in rows]


@lru_cache(maxsize=1)
def get_dal() -> Dal:
    """The process's data-access layer (settings and client are resolved at each call)."""
    return Dal()


class TableAccess:
    """A group of access patterns over the table, through a :class:`Dal` (its client, table
    name, error translation and request primitives): the one given, or the process's."""

    def __init__(self, dal: Dal | None = None) -> None:
        self._dal = dal

    @property
    def dal(self) -> Dal:
        return self._dal or get_dal()
