"""Reliability checks backed by the Relayflow table: flow control of a step
(:mod:`relayflow.reliability.flow`, in the step functions) and circuit breakers
(:mod:`relayflow.reliability.breakers`: tool breakers in the tool function, workflow breakers
in the control plane, the recorder and the trigger function). See ``docs/reliability.md``."""
