"""The names clients give tssd (pnfsids, queues, volumes, bfids): checked whole, or refused.

``re.match(r"^[0-9A-F]{1,64}$", text)`` accepts ``"BB01\\n"``: ``$`` also matches before a
final newline. That let ``"BB01\\n"`` pass as a second pnfsid next to ``"BB01"`` and write
a second tape copy (issue 17). Every name tssd accepts is one character class with a
length bound, so a check needs no regular expression at all: a name is valid only when
*every* character is in its alphabet and its length is within bounds (the same answer as
``re.fullmatch``, property-tested in tests/unit/test_names.py).

This module imports nothing: ``tss-hsm`` uses it, and its start-up budget has no room
for ``re`` (see :mod:`tssd.shim`).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs milliseconds to import; mypy treats this name specially
if TYPE_CHECKING:
    from typing import TypeGuard

#: The longest path or URI a client may send (the API's bodies, tssctl's file lists).
MAX_PATH = 4096

_LOWER = "abcdefghijklmnopqrstuvwxyz"
_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_DIGITS = "0123456789"
_HEX = "0123456789abcdefABCDEF"


class Name:
    """One kind of name: an alphabet and a length bound; ``pattern`` is its regex."""

    __slots__ = ("alphabet", "longest", "pattern", "what")

    def __init__(self, what: str, alphabet: str, char_class: str, longest: int) -> None:
        self.what = what
        self.alphabet = alphabet
        self.longest = longest
        #: The equivalent regular expression, for OpenAPI documents and tests.
        self.pattern = f"^[{char_class}]{{1,{longest}}}$"

    def fullmatch(self, text: object) -> TypeGuard[str]:
        """Whether *text* is a string of 1 to ``longest`` characters of the alphabet."""
        # str.strip removes alphabet characters from both ends only; what remains is
        # empty exactly when every character belongs to the alphabet.
        return (
            isinstance(text, str)
            and 0 < len(text) <= self.longest
            and not text.strip(self.alphabet)
        )

    def describe(self) -> str:
        return f"{self.what} must be {self.pattern[1:-1]}"


#: dCache pnfsids (ChimeraIDs, 36 upper-case hex digits; old PNFS ids, 24).
PNFSID = Name("pnfsid", _HEX, "0-9A-Fa-f", 64)
QUEUE = Name("queue", _LOWER + _UPPER + _DIGITS + "_.:-", "A-Za-z0-9_.:-", 64)
VOLUME = Name("volume", _LOWER + _UPPER + _DIGITS + "_.:-", "A-Za-z0-9_.:-", 32)
#: bfids, storage classes, HSM type and instance, store and group.
NAME = Name("name", _LOWER + _UPPER + _DIGITS + "_.:@/+-", "A-Za-z0-9_.:@/+-", 255)
ADLER32 = Name("adler32", _HEX, "0-9A-Fa-f", 8)


def pnfsid_or_none(text: object) -> str | None:
    """*text* as tssd stores pnfsids (upper case, as dCache prints them), or None if invalid.

    The one normalisation, applied where a pnfsid enters tssd (API, files, command
    line): ``bb01`` and ``BB01`` name one file and must meet the one-open-request rule.
    dCache compares pnfsids as bytes and prints them upper-case, zero-padded to 24 or 36
    digits (``diskCacheV111/util/PnfsId.java``: ``toString`` is
    ``HexFormat.of().withUpperCase()``), so what it hands ``tss-hsm`` is already in this
    form; tssd does not pad shorter ids, which only hand-made requests use.
    """
    return text.upper() if isinstance(text, str) and PNFSID.fullmatch(text) else None


def is_int(text: str, longest: int = 19) -> bool:
    """``[+-]?[0-9]{1,longest}`` exactly: no spaces, underscores or non-ASCII digits,
    all of which ``int()`` accepts; bounded, because ``int()`` refuses huge digit strings."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    return 0 < len(digits) <= longest and not digits.strip(_DIGITS)


def is_hex(text: str, longest: int) -> bool:
    """1 to *longest* hex digits of either case."""
    return 0 < len(text) <= longest and not text.strip(_HEX)
