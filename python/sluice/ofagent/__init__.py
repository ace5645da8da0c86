"""The OpenFlow 1.3 agent of sluiced (docs/openflow.md)."""
