"""The simulated tape library: an IBM SP-like catalog in the tssd database, object bytes
in a directory, and drives, robot and media timed by a :class:`Profile`.

It backs the embedded default of ``tssd serve``, the tests, and ``tssd simulate``.
"""

from tssd.backends.sim.library import SimLibrary
from tssd.backends.sim.profiles import PROFILES, Profile, get_profile

__all__ = ["PROFILES", "Profile", "SimLibrary", "get_profile"]
