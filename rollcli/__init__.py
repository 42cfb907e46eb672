"""rollcli: declarative experiments on where to spend rollouts in group-based RL post-training."""

__version__ = "0.1.0"
__all__ = ["__version__"]
