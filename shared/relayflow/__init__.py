"""Relayflow: workflow definitions compiled to AWS Step Functions."""

__version__ = "0.1.0"
