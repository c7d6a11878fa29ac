"""``tssd simulate``: a recall campaign against the simulated library in virtual time.

The same scheduler, request store and backend code as ``tssd serve``; only the clock (a
virtual-time event loop) and the data sink (bytes counted, not stored) differ.
"""
