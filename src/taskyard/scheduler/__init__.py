"""The task-graph scheduler: graphs of queue tasks, scheduled as what they require completes.

`service.py` holds the `Scheduler` object, `graphs.py` createTaskGraph, extendTaskGraph and the
reads, `reactions.py` what the scheduler does when a graph's task resolves (from the queue's
events, and from a sweep that catches any event it missed).
"""
