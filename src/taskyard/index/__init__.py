"""The index service: tasks found by dot-separated paths (TaskCluster's index).

`service.py` holds the `Index` object, `entries.py` the API's operations (insert, find, list,
delete) and the expiry sweep, `indexing.py` the indexer: it reads the queue's task-completed
events from the event log, with a cursor moved in the same transaction as the entries it writes,
and indexes each task under its `index.<path>` routes.
"""
