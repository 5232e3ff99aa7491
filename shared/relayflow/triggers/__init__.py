"""Trigger mechanics: cron and one-time schedules (EventBridge Scheduler), event rules and
publishing (EventBridge), webhook signatures, trigger sync, and the deliveries the trigger
function receives. Never imports the control plane: the use cases that start runs for a
delivery (dispatch, webhook intake, catch-up) are in :mod:`relayflow.control`.

Each module is imported on its own (``relayflow.triggers.sync`` …); this package imports none
of them, so a handler pays only for the trigger kind it serves.
"""
