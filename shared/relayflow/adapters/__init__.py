"""Adapters to AWS services: the only place boto3 clients are created."""
