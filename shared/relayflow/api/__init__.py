"""The control plane's HTTP API: API Gateway REST (v1) proxy events in, ControlPlane calls out.

* :mod:`relayflow.api.app` — the Lambda entry point; refuses what no route reads
  (:mod:`relayflow.api.precheck`), then loads the routes (:mod:`relayflow.api.routing`).
* :mod:`relayflow.api.resolver` — the Powertools resolver, the error model, shared helpers.
* :mod:`relayflow.api.routes` — the routes and request models, one module per resource.
* :mod:`relayflow.api.auth` — the REQUEST authorizer: API key → tenant.
* :mod:`relayflow.api.openapi` — the OpenAPI document the resolver serves.
* :mod:`relayflow.api.approval_page` — the guest approval page a signed link opens.

Nothing is imported here: ``functions/authorizer`` must not pay for the resolver.
"""
