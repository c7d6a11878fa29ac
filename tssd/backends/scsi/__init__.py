"""A SCSI tape library driven directly: ``mtx`` on the changer, the Linux st driver on
the drives, tssd's own on-tape format, and the catalog in the tssd database.

The same code drives mhVTL, real libraries and the emulated devices of :mod:`.emulated`
(file-backed drives and an ``mtx``-compatible changer, :mod:`.mtxemu`). This package
imports nothing heavy so that the changer emulator starts fast as a subprocess.
"""
