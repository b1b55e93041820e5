"""`python -m delphi_ls`: the language server over stdio."""

import sys

from .server import main

sys.exit(main())
