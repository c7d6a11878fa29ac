"""ENDIT directory intake: the daemon side of dCache's endit nearline storage provider."""
