"""``python -m tssd.shim``: the same as ``tss-hsm``."""

import sys

from tssd.shim.main import main

sys.exit(main())
