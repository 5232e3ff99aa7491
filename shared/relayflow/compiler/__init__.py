"""The compiler: a validated workflow in, an ASL state machine out."""

from relayflow.compiler.compile import compile_workflow
from relayflow.compiler.mermaid import to_mermaid
from relayflow.compiler.options import CompiledWorkflow, CompileOptions

__all__ = ["CompileOptions", "CompiledWorkflow", "compile_workflow", "to_mermaid"]
