"""Workflow triggers: cron and one-time schedules (EventBridge Scheduler), events and webhooks.

Each module is imported on its own (``relayflow.triggers.sync`` …); this package imports none
of them, so a handler pays only for the trigger kind it serves.
"""
