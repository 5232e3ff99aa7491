"""The control plane: one module per use case (workflows, runs, admission, the DLQ, breakers,
API keys, the recorder) over the ports of :mod:`relayflow.control.ports`, composed by
:class:`relayflow.control.service.ControlPlane`, which nothing in this package imports."""
