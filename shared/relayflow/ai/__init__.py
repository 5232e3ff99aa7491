"""AI steps: model providers behind one small interface, the price table, the tool box an
agent sees, and the scripted provider the demo and the tests use.

Nothing here imports boto3 or httpx at module import: a provider loads what it needs on its
first call."""
