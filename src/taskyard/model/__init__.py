"""Pure domain: task definitions, runs and their state machine, routing keys, ids, errors. No I/O."""
