"""``tss-hsm``, the dCache HSM script: the console-script entry point.

The script lives in :mod:`tssd.shim` (standard library only, cheap to import); this module
keeps the ``tssd.hsm:main`` entry point and ``python -m tssd.hsm`` working.
"""

from __future__ import annotations

import sys

from tssd.shim.main import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
