"""The control API's routes, one Powertools ``Router`` per resource; :mod:`relayflow.api.routing`
includes them (in this order: workflows, runs, events, breakers, dlq, waits).

No ``from __future__ import annotations`` in these modules: the resolver reads the route
parameters' annotations at registration time.
"""
