"""The resolver with every route included: what :func:`relayflow.api.app.handle` loads on the
API function's first request, not at its import.

Powertools' request validation, the route modules and the control-plane models they name cost
about as much to import as boto3 does, so the API function's import stays light and they load
once, with the first request. Python's import lock makes that first load safe when the local
server answers requests in threads.
"""

from aws_lambda_powertools.event_handler import Response, content_types

from relayflow.api import openapi
from relayflow.api.resolver import app
from relayflow.api.routes import breakers, dlq, events, runs, waits, workflows

# The order the routes were written in is the order of the OpenAPI document's paths.
app.include_router(workflows.router)
app.include_router(runs.router)
app.include_router(events.router)
app.include_router(breakers.router)
app.include_router(dlq.router)
app.include_router(waits.router)


@app.get("/openapi.json", include_in_schema=False)
def openapi_document() -> Response[str]:
    from aws_lambda_powertools.event_handler.openapi.models import Server

    return Response(
        status_code=200,
        content_type=content_types.APPLICATION_JSON,
        body=app.get_openapi_json_schema(servers=[Server(url=_base_path() or "/")]),
    )


@app.get("/swagger", include_in_schema=False)
def swagger() -> Response[str]:
    return openapi.swagger_page(app, _base_path(), app.current_event.query_string_parameters or {})


def _base_path() -> str:
    """``/<stage>`` behind the execute-api URL, where every path starts with the stage
    (/prod/workflows); empty behind a custom domain or the local server."""
    context = app.current_event.get("requestContext") or {}
    stage, path = str(context.get("stage") or ""), str(context.get("path") or "")
    return f"/{stage}" if stage and stage != "$default" and path.startswith(f"/{stage}/") else ""
