"""Print template.yaml translated to plain CloudFormation (JSON), as `sam deploy` sends it.

Run with the SAM CLI's Python (``.venv/tools/sam/bin/python tests/deploy/sam_translate.py``):
it uses the SAM CLI's own translator (``samtranslator``) offline: local code paths become the
S3 locations ``sam package`` would upload them to, and no AWS call is made.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main() -> int:
    from samcli.yamlhelper import yaml_parse
    from samtranslator.translator.transform import transform

    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    template = yaml_parse(Path(sys.argv[1] if len(sys.argv) > 1 else "template.yaml").read_text())
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

    translated = transform(template, {}, ManagedPolicies())
    json.dump(translated, sys.stdout, indent=1, sort_keys=True, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
