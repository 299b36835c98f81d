"""The `taskyard` command."""
