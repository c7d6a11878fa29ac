"""Backend-neutral knowledge of tape media: geometry and timing models."""
