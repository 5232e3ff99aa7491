"""The control plane's HTTP API: API Gateway REST (v1) proxy events in, ControlPlane calls out.

* :mod:`relayflow.api.app` — the Powertools resolver: routes, request models, the error model.
* :mod:`relayflow.api.auth` — the REQUEST authorizer: API key → tenant.
* :mod:`relayflow.api.openapi` — the OpenAPI document the resolver serves.

Nothing is imported here: ``functions/authorizer`` must not pay for the resolver.
"""
