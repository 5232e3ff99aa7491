"""Expressions (CEL) and templates (``{{ expr }}``) over the state document.

Evaluation runs CEL through celpy; :mod:`relayflow.expressions.asl` translates the subset
that Step Functions can evaluate natively (Choice rules, ``Parameters``). The syntax is
documented in ``docs/expressions.md``.
"""

from relayflow.expressions.asl import (
    condition_to_choice,
    expression_jsonpath,
    template_to_parameters,
)
from relayflow.expressions.cel import (
    ExpressionSyntaxError,
    check_expression,
    evaluate,
    evaluate_condition,
    expression_paths,
)
from relayflow.expressions.templates import (
    TemplateSyntaxError,
    check_template,
    render,
    template_expressions,
)

__all__ = [
    "ExpressionSyntaxError",
    "TemplateSyntaxError",
    "check_expression",
    "check_template",
    "condition_to_choice",
    "evaluate",
    "evaluate_condition",
    "expression_jsonpath",
    "expression_paths",
    "render",
    "template_expressions",
    "template_to_parameters",
]
