"""The simulated library's profiles: the backend-neutral media models of
:mod:`tssd.tape.geometry` (kept here so that existing imports keep working)."""

from tssd.tape.geometry import (
    GRIDKA_T10K,
    LTO8,
    LTO9,
    PROFILES,
    Profile,
    get_profile,
)

__all__ = ["GRIDKA_T10K", "LTO8", "LTO9", "PROFILES", "Profile", "get_profile"]
