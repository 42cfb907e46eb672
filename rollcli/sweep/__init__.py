"""Sweeps: a base spec plus axes over any spec key, run as one deduplicated set of jobs."""
