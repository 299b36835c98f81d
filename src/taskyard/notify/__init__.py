"""The notify service: email and pulse notifications (TaskCluster's notify).

`service.py` holds the `Notify` object, `mail.py` the SMTP client, `sending.py` the API's email
and pulse operations and the denylist, `deliveries.py` the notifier: it reads the queue's task
events from the event log, with a cursor moved in the same transaction as the notifications it
records (one per event and `notify.` route, the dedup key), then sends each recorded one until it
is marked sent.
"""
