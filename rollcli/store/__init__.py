"""The run store: experiment folders, manifests, job state, metrics and checkpoints on disk."""
