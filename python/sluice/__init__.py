"""sluice: a userspace software switch for NFV on DPDK (Python side: CLI and harness)."""

__version__ = "0.1.0"
