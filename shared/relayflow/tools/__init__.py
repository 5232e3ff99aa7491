"""Tools a ``tool`` step can call: built-in AWS actions and declared HTTP APIs.

:mod:`relayflow.tools.catalogue` names them and checks definitions; :mod:`.aws` and
:mod:`.http` perform them; :mod:`.secrets` reads the secrets HTTP auth and webhook signing
need. The catalogue is documented in ``docs/tools.md``. Importing this package is cheap: boto3
and httpx load on first use.
"""

from relayflow.tools.catalogue import aws_tool_names, check_tool, iam_actions, run_tool

__all__ = ["aws_tool_names", "check_tool", "iam_actions", "run_tool"]
