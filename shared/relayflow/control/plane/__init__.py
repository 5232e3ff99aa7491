"""The parts :class:`relayflow.control.service.ControlPlane` is composed of, one per resource.

:mod:`.common` holds the limits, helpers and mappings every part shares, :mod:`.base` the
state and lookups; :mod:`.workflows`, :mod:`.runs` and :mod:`.access` (circuit breakers and
API keys) each add one resource's methods. Import the control plane from
:mod:`relayflow.control.service`.
"""
