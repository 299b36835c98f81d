"""The patterns TaskCluster checks identifiers against, each written once.

They are JavaScript-style, anchored with `^...$`: `schema.string(pattern=...)` reads the final `$`
as the very end of the value, and `re.fullmatch` needs no anchors at all.
"""

from __future__ import annotations

# A v4 UUID with its first bit clear ("nice" slugids), in 22 URL-safe base64 characters.
SLUGID = r"^[A-Za-z0-9_-]{8}[Q-T][A-Za-z0-9_-][CGKOSWaeimquy26-][A-Za-z0-9_-]{10}[AQgw]$"
# provisionerId, workerGroup, workerId (and a workerType as a URL gives it).
IDENT = r"^[a-zA-Z0-9-_]{1,38}$"
# A workerType in a task definition: lower case, starting with a letter.
WORKER_TYPE = r"^[a-z]([-a-z0-9]{0,36}[a-z0-9])?$"
# `<provisionerId>/<workerType>`.
TASK_QUEUE_ID = r"^[a-zA-Z0-9-_]{1,38}/[a-z]([-a-z0-9]{0,36}[a-z0-9])?$"
# A clientId, as createClient takes it and as every stored or static client has it.
CLIENT_ID = r"^[A-Za-z0-9!@/:.+|_-]+$"
