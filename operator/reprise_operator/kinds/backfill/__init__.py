"""The Backfill kind: `steps` (its lifecycle hooks) and the modules only it uses."""
