"""Scheduling: which tape to mount next, on which drive, and what to read in what order."""
