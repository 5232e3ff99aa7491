"""The compiler: a validated workflow in, an ASL state machine out."""

from relayflow.compiler.compile import CompiledWorkflow, CompileOptions, compile_workflow
from relayflow.compiler.mermaid import to_mermaid

__all__ = ["CompileOptions", "CompiledWorkflow", "compile_workflow", "to_mermaid"]
