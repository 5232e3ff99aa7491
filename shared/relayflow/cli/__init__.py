"""The ``relayflow`` command line, one module per command group; :mod:`relayflow.cli.main`
builds the parser and runs a command (the ``relayflow`` script's entry point)."""
