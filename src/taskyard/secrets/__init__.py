"""The secrets service: small JSON values kept under a name, readable by scope, until they expire.

`crypto.py` seals each value with AES-256-GCM under a key derived from the deployment's secret key
(the name as associated data, so a sealed value can't be moved to another name), `service.py`
holds the `Secrets` object, `store.py` set, get, remove, list, the expiry sweep and the re-sealing
of values an earlier secret key sealed.
"""
