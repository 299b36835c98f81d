"""The worker-manager: worker pools, their workers and errors, and the providers that start them
(`static`: machines someone else runs; `local`: `taskyard worker` processes on the server's
machine, started as work waits and stopped when it is done). docs/worker-pools.md."""
