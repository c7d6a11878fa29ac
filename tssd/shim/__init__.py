"""``tss-hsm``, the dCache HSM script: standard library only, and cheap to import.

dCache forks the script for every call, hundreds of times a second in poll mode, so these
modules import nothing beyond what the interpreter loads at start-up plus a few C modules:
no ``re``, ``json``, ``socket``, ``signal``, ``dataclasses`` or ``typing`` at run time (each
costs milliseconds). ``args`` parses a call, ``client`` speaks HTTP to tssd, ``actions`` runs
put/get/remove, ``main`` maps the outcome to dCache's exit codes.
"""
