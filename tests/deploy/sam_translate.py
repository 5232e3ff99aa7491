"""Print template.yaml translated to plain CloudFormation (JSON), as `sam deploy` sends it.

Run with the SAM CLI's Python (``.venv/tools/sam/bin/python tests/deploy/sam_translate.py
[template] [--parameter-overrides '{"Stage": "prod"}']``): it uses the SAM CLI's own
translator (``samtranslator``) offline: local code paths become the S3 locations ``sam
package`` would upload them to, and no AWS call is made.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def main() -> int:
    from samcli.yamlhelper import yaml_parse
    from samtranslator.translator.transform import transform

    parser = argparse.ArgumentParser()
    parser.add_argument("template", nargs="?", default="template.yaml")
    parser.add_argument(
        "--parameter-overrides", default="{}", help="JSON object of parameter values"
    )
    args = parser.parse_args()
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    template = yaml_parse(Path(args.template).read_text())
    for resource in template["Resources"].values():
        props = resource.get("Properties") or {}
        for key in ("CodeUri", "ContentUri"):
            if isinstance(props.get(key), str):
                props[key] = f"s3://sam-artifacts/{props[key].strip('/')}.zip"

    class ManagedPolicies:
        """The AWS managed policies SAM may attach, by name (no IAM ListPolicies call)."""

        def load(self) -> dict[str, str]:
            return {}

        def get(self, name: str) -> str:
            return f"arn:aws:iam::aws:policy/{name}"

    # SAM resolves parameters in a few properties (LayerName among them) from these values.
    parameters = {
        name: spec["Default"]
        for name, spec in (template.get("Parameters") or {}).items()
        if "Default" in spec
    }
    parameters.update(json.loads(args.parameter_overrides))
    translated = transform(template, parameters, ManagedPolicies())
    json.dump(translated, sys.stdout, indent=1, sort_keys=True, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
