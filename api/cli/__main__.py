"""``python -m api.cli``: the ``flagsight`` command."""

import sys

from api.cli.main import main

sys.exit(main())
