"""``python -m forge_lsp.engine.worker``: the worker process (see `main`)."""

import sys

from .main import main

sys.exit(main())
