"""Several tssd instances (tape servers) sharing one PostgreSQL database.

Claims that cannot conflict: every instance schedules only the drives attached to its own
host over the shared queue. A cartridge is claimed by writing it into the claiming drive's
row before the mount (``drives.volume`` is unique across all instances), requests are
claimed with ``FOR UPDATE SKIP LOCKED`` and carry the claiming instance, and a heartbeat
keeps the instance's lease. Any instance reaps an instance whose heartbeat is older than
``cluster.lease_s``: its active requests return to the queue and its drives' cartridges
are released. See docs/scaling.md.
"""
