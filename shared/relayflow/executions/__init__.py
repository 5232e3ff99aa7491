"""Step Functions executions, below the control plane: the Step Functions port
(:mod:`~relayflow.executions.stepfunctions`) and the reading of an execution's history
(:mod:`~relayflow.executions.history`). Imports nothing above the infra layer."""
