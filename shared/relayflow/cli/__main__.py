"""``python -m relayflow.cli``: the ``relayflow`` command."""

import sys

from relayflow.cli.main import main

sys.exit(main())
