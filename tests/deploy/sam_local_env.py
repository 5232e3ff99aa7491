"""Print, as JSON, the environment `sam local invoke` gives each function (run with the SAM
CLI's own Python: ``.venv/tools/sam/bin/python tests/deploy/sam_local_env.py [--env-vars F]``).

It goes through the SAM CLI's own code path up to the container: the stack provider (template
parsing, globals, SAM's intrinsic resolver), ``SamFunctionProvider`` and
``LocalLambdaRunner._make_env_vars`` (env-vars file precedence, blanks for what it cannot
resolve), then ``EnvironmentVariables.resolve()``. No Docker is touched: the runner is built
without a container runtime and never invokes anything.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--template", default="template.yaml")
    parser.add_argument("--env-vars", help="SAM's --env-vars JSON file")
    parser.add_argument("--parameter-overrides", default="{}", help="JSON object")
    args = parser.parse_args()

    from samcli.commands.local.lib.local_lambda import LocalLambdaRunner
    from samcli.lib.providers.sam_function_provider import SamFunctionProvider
    from samcli.lib.providers.sam_stack_provider import SamLocalStackProvider

    stacks, _ = SamLocalStackProvider.get_stacks(
        args.template, parameter_overrides=json.loads(args.parameter_overrides)
    )
    provider = SamFunctionProvider(stacks)
    env_values = {}
    if args.env_vars:
        with open(args.env_vars) as handle:
            env_values = json.load(handle)
    runner = LocalLambdaRunner(
        local_runtime=None,  # type: ignore[arg-type]  # never invoked: no container runtime
        function_provider=provider,
        cwd=os.getcwd(),
        real_path=os.getcwd(),
        aws_region="us-east-1",
        env_vars_values=env_values,
    )
    # The credentials sam local invoke passes when no profile resolves (no real AWS here).
    runner._boto3_session_creds = None
    runner.get_aws_creds = lambda: {}  # type: ignore[method-assign]
    found = {}
    for function in provider.get_all():
        env = runner._make_env_vars(function).resolve()
        found[function.name] = {
            "handler": function.handler,
            "codeuri": function.codeuri,
            "env": env,
        }
    json.dump(found, sys.stdout, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
