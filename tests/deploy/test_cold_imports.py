"""What a handler's import (the Lambda init phase) must not load: the modules that cost each
function its cold-start budget (1.5x ``import boto3``; docs/operations.md) and that it loads
only when a request needs them.

Each handler is imported in a fresh interpreter, as Lambda does. On the code before issue 37,
every step handler loaded ``pydantic_settings`` (and with it ``asyncio``) through
``relayflow.settings``; the API loaded Powertools' resolver, its OpenAPI models and params
and every route module; the code step loaded the definition models; the recorder and the
maintenance function loaded the Express children's and the API's models.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from sam_template import ROOT, function_resources, load_template

FUNCTIONS = sorted(function_resources(load_template()))
#: Loaded by no handler's import.
NEVER = ("asyncio", "pydantic_settings")
#: What each function loads on first use instead (docs/operations.md, "Cold starts and the
#: layer").
LATER = {
    "api": (
        "aws_lambda_powertools.event_handler",
        "aws_lambda_powertools.event_handler.openapi.models",
        "aws_lambda_powertools.event_handler.openapi.params",
        "relayflow.api.resolver",
        "relayflow.api.routing",
        "relayflow.control.models",
    ),
    "code": ("relayflow.definition.models", "relayflow.definition.step_models"),
    "recorder": (
        "relayflow.control.express_children",
        "relayflow.control.express_timeline",
        "relayflow.control.models",
    ),
    "maintenance": ("relayflow.control.recorder", "relayflow.control.models"),
}
OPENAPI_MODELS = "aws_lambda_powertools.event_handler.openapi.models"

_IMPORT_HANDLER = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("app", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(json.dumps(sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)))
"""


def _loaded_by_import(kind: str, modules: tuple[str, ...]) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_HANDLER, f"functions/{kind}/app.py", json.dumps(modules)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    return json.loads(done.stdout)


def test_every_function_with_a_heavier_import_is_a_deployed_function():
    assert set(LATER) <= set(FUNCTIONS)


@pytest.mark.parametrize("kind", FUNCTIONS)
def test_a_handler_import_loads_nothing_it_needs_only_later(kind: str):
    # Given a fresh interpreter, as a Lambda execution environment starts
    # When the handler module is imported (the init phase)
    loaded = _loaded_by_import(kind, NEVER + LATER.get(kind, ()))
    # Then none of the modules moved off the import path is loaded
    assert loaded == [], f"functions/{kind} imports {loaded}"


_API_REQUESTS = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("app", "functions/api/app.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)

def get(path, query=None):
    event = {
        "resource": "/{proxy+}", "path": path, "httpMethod": "GET", "headers": {},
        "multiValueHeaders": {}, "queryStringParameters": query,
        "multiValueQueryStringParameters": {k: [v] for k, v in (query or {}).items()} or None,
        "pathParameters": None, "body": None, "isBase64Encoded": False,
        "requestContext": {"requestId": "r-1", "stage": "prod", "path": "/prod" + path},
    }
    return module.handler(event, None)

answers = {"run": get("/runs/" + "a" * 32)}
answers["models_after_run"] = sys.argv[1] in sys.modules
answers["document"] = json.loads(get("/openapi.json")["body"])
answers["swagger"] = get("/swagger")
answers["swagger_json"] = json.loads(get("/swagger", {"format": "json"})["body"])
print(json.dumps(answers))
"""


def test_the_openapi_models_load_only_for_the_documents_and_serve_them_whole():
    # Given the API function in a fresh interpreter
    done = subprocess.run(
        [sys.executable, "-c", _API_REQUESTS, OPENAPI_MODELS],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    answers = json.loads(done.stdout.strip().splitlines()[-1])
    # When a route is requested without a key, the route answers (401), and Powertools'
    # OpenAPI models are still not loaded
    assert answers["run"]["statusCode"] == 401
    assert json.loads(answers["run"]["body"])["code"] == "unauthorized"
    assert answers["models_after_run"] is False
    # Then the document, built on its request, has both auth schemes and requires one of them,
    # with the stage as its server
    document = answers["document"]
    assert set(document["components"]["securitySchemes"]) == {"bearer", "apiKey"}
    assert document["components"]["securitySchemes"]["apiKey"]["name"] == "X-Api-Key"
    assert document["security"] == [{"bearer": []}, {"apiKey": []}]
    assert document["servers"] == [{"url": "/prod"}]
    assert document["info"]["title"] == "Relayflow control API"
    # And the Swagger UI serves the same document, inline in its page or alone
    swagger = answers["swagger"]
    assert swagger["statusCode"] == 200
    assert swagger["multiValueHeaders"]["Content-Type"] == ["text/html"]
    assert '"securitySchemes"' in swagger["body"] and "SwaggerUIBundle" in swagger["body"]
    assert answers["swagger_json"] == document
