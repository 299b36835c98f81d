"""Artifacts as pure rules: names, request bodies per storage type, re-create and acceptance rules.

See docs/protocol.md, Artifacts. An artifact belongs to one run of a task and is keyed by its name;
`s3` artifacts hold a blob in the blob store, `reference` a URL, `link` another artifact of
the same run, `error` why the worker could not upload.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Literal, NotRequired, TypedDict, cast

from taskyard.model import dates, digits, schema
from taskyard.model.errors import InputError, InsufficientScopes, RequestConflict
from taskyard.model.status import RunStatus
from taskyard.model.types import JSONObject, LooseJSON, Millis

StorageType = Literal["s3", "reference", "link", "error"]
STORAGE_TYPES: tuple[StorageType, ...] = ("s3", "reference", "link", "error")
ERROR_REASONS = (
    "file-missing-on-worker",
    "invalid-resource-on-worker",
    "too-large-file-on-worker",
    "file-not-readable-on-worker",
)
NAME_PATTERN = r"^[\x20-\x7e]+$"
MAX_NAME = 1024
DEFAULT_CONTENT_TYPE = "application/binary"
# What an s3 artifact's `contentEncoding` may declare; its upload must then send the same
# Content-Encoding. TaskCluster's clients declare none and upload plain or gzip: declaring none
# (or identity) admits those two, and a body labelled gzip must be gzip.
CONTENT_ENCODINGS = ("identity", "gzip", "br", "deflate", "zstd")
IDENTITY = "identity"
UNDECLARED = ""
UNDECLARED_ALLOWED = ("identity", "gzip")
EXPIRES_SLACK_MS = 15 * 60 * 1000  # expires may lie up to 15 minutes in the past (clock skew)
EXCEPTION_WINDOW_MS = 25 * 60 * 1000  # artifacts are accepted this long after an exception
PUT_URL_TTL_MS = 45 * 60 * 1000  # the local store's, whose URLs also write only once
S3_PUT_URL_TTL_MS = 20 * 60 * 1000  # S3 can't refuse a second PUT: its URLs live less long
GET_URL_TTL_MS = 30 * 60 * 1000
MAX_LINKS = 100
_NAME = re.compile(NAME_PATTERN)

_CONTENT_TYPE = schema.string(max_length=255)
_COMMON = {"storageType": schema.enum(*STORAGE_TYPES), "expires": schema.date_time()}
BODIES = {
    "s3": schema.obj(
        {
            **_COMMON,
            "contentType": _CONTENT_TYPE,
            "contentEncoding": schema.enum(*CONTENT_ENCODINGS),
            "contentLength": schema.integer(minimum=0),
        },
        required=["storageType", "expires", "contentType"],
        additional=False,
    ),
    "reference": schema.obj(
        {
            **_COMMON,
            "contentType": _CONTENT_TYPE,
            "url": schema.string(pattern=r"^https?://[\x21-\x7e]+$", max_length=4096),
        },
        required=["storageType", "expires", "url", "contentType"],
        additional=False,
    ),
    "link": schema.obj(
        {**_COMMON, "contentType": _CONTENT_TYPE, "artifact": schema.string(max_length=MAX_NAME)},
        required=["storageType", "expires", "artifact"],
        additional=False,
    ),
    "error": schema.obj(
        {**_COMMON, "reason": schema.enum(*ERROR_REASONS), "message": schema.string(max_length=4096)},
        required=["storageType", "expires", "reason", "message"],
        additional=False,
    ),
}
REQUEST = schema.obj(
    {"storageType": schema.enum(*STORAGE_TYPES), "expires": schema.date_time()},
    required=["storageType", "expires"],
    additional=True,
)


class ArtifactInfo(TypedDict):
    """An artifact as listArtifacts and artifactInfo answer it."""

    storageType: StorageType
    name: str
    expires: str
    contentType: str
    contentLength: NotRequired[float]  # a whole number, as the client wrote it (5 or 5.0)


@dataclass(frozen=True)
class Artifact:
    task_id: str
    run_id: int
    name: str
    storage_type: StorageType
    content_type: str
    expires: Millis
    details: JSONObject
    present: bool = True
    # An s3 artifact's one open upload: its URL carries this token, and the first PUT stored
    # with it clears it. None: no PUT may write (uploaded, replaced, or not an s3 artifact).
    upload_token: str | None = None

    @property
    def blob_key(self) -> str:
        return f"{self.task_id}/{self.run_id}/{self.name}"

    @property
    def content_encoding(self) -> str:
        """The Content-Encoding its upload declared (`identity` when it declared none)."""
        return str(self.details.get("contentEncoding", IDENTITY))

    @property
    def declared_encoding(self) -> str:
        """The Content-Encoding createArtifact declared, or UNDECLARED for none or identity."""
        return str(self.details.get("contentEncoding", UNDECLARED))

    def info(self) -> ArtifactInfo:
        """The artifact as listArtifacts and artifactInfo answer it."""
        found: ArtifactInfo = {
            "storageType": self.storage_type,
            "name": self.name,
            "expires": dates.to_iso(self.expires),
            "contentType": self.content_type,
        }
        length = self.details.get("contentLength")
        if isinstance(length, int | float):  # the number from_request stored, if the body had one
            found["contentLength"] = length
        return found


def check_name(name: str, field: str = "artifact name", error: type[InputError] = InputError) -> str:
    """Refuse names that are empty, too long, not printable ASCII, or hold a `..`, `.` or empty
    path segment. A URL holding such a name is one a client or proxy may normalize (RFC 3986
    removes dot segments; many collapse `//`) into another artifact's: `public/./x` would be read
    and written as `public/x`, while both could exist side by side."""
    if not _NAME.fullmatch(name) or len(name) > MAX_NAME:
        raise error(f"{field} must match {NAME_PATTERN} and be at most {MAX_NAME} characters")
    segments = name.split("/")
    if ".." in segments:
        raise error(f"{field} may not contain a `..` path segment")
    if "." in segments:
        raise error(f"{field} may not contain a `.` path segment")
    if "" in segments:
        raise error(f"{field} may not contain an empty path segment (a leading, trailing or doubled `/`)")
    return name


def from_request(task_id: str, run_id: int, name: str, request: object, now: Millis) -> Artifact:
    """The artifact a createArtifact body describes; 400 if the body breaks its type's rules."""
    schema.validate(REQUEST, request)
    body = cast(LooseJSON, request)  # the schemas check every field read below
    kind: StorageType = body["storageType"]
    schema.validate(BODIES[kind], body)
    expires = schema.to_millis(body["expires"])
    if expires < now - EXPIRES_SLACK_MS:
        raise InputError("body.expires is in the past: an artifact must expire in the future")
    details: JSONObject = {}
    if kind == "s3":
        if "contentLength" in body:
            details["contentLength"] = body["contentLength"]
        if body.get("contentEncoding", IDENTITY) != IDENTITY:
            details["contentEncoding"] = body["contentEncoding"]
    elif kind == "reference":
        details["url"] = body["url"]
    elif kind == "link":
        details["artifact"] = check_name(body["artifact"], "body.artifact (an artifact name)")
    elif kind == "error":
        details = {"reason": body["reason"], "message": body["message"]}
    content_type = body.get("contentType", DEFAULT_CONTENT_TYPE)
    return Artifact(task_id, run_id, name, kind, content_type, expires, details, present=True)


def check_expires(artifact: Artifact, task_expires: Millis) -> None:
    if artifact.expires > task_expires:
        raise InputError(
            f"Artifact expires ({dates.to_iso(artifact.expires)}) after the task expiration "
            f"{dates.to_iso(task_expires)} (task.expires < expires) - this is not allowed, "
            "artifacts may not expire after the task they belong to expires"
        )


def accepts_artifacts(run: RunStatus, now: Millis) -> bool:
    """Whether a claimed run may take artifacts now: while running, and for a while after an exception."""
    if run["state"] == "running":
        return True
    resolved = run.get("resolved") if run["state"] == "exception" else None
    return resolved is not None and now <= dates.parse_iso(resolved) + EXCEPTION_WINDOW_MS


def check_run_accepts(run: RunStatus | None, now: Millis) -> None:
    """400 if the run does not exist or was never claimed; 409 unless it may take artifacts now."""
    if run is None:
        raise InputError("the run does not exist")
    if "workerGroup" not in run:
        raise InputError("artifacts cannot be created for a run that was never claimed")
    if accepts_artifacts(run, now):
        return
    raise RequestConflict(
        "Artifacts cannot be created for a task after it is resolved, unless it is resolved "
        "'exception', and even in this case only up to 25 min past resolution."
    )


def recreate(old: Artifact, new: Artifact) -> Artifact:
    """What re-creating `old` as `new` stores, or 409 (the re-create rules: docs/protocol.md, Artifacts)."""
    expires = max(old.expires, new.expires)
    if old.storage_type == "reference" and new.storage_type == "link":
        return replace(new, content_type=old.content_type, expires=expires)
    if old.storage_type != new.storage_type:
        raise _conflict(old)
    if new.storage_type != "link" and old.content_type != new.content_type:
        raise _conflict(old)
    if new.storage_type != "reference" and old.details != new.details:
        raise _conflict(old)
    return replace(new, content_type=old.content_type, expires=expires)


def _conflict(old: Artifact) -> RequestConflict:
    return RequestConflict(
        "Artifact already exists with different properties, and none of the allowed exceptions "
        f"apply: storageType {old.storage_type}, contentType {old.content_type}"
    )


# Uploads to the local store's signed PUT URLs ----------------------------------------------------


class UploadRefused(InsufficientScopes):
    """The upload URL no longer lets anyone write: it was used or replaced, or its run is resolved."""


def split_blob_key(key: str) -> tuple[str, int, str] | None:
    """`(taskId, runId, name)` of a blob key `<taskId>/<runId>/<name>`; None if it is not one."""
    parts = key.split("/", 2)
    run_id = digits.parse_whole(parts[1], 6) if len(parts) == 3 else None
    return None if run_id is None else (parts[0], run_id, parts[2])


def encoding_of_header(value: str | None) -> str:
    """The Content-Encoding a request sent, as createArtifact would declare it (`identity`: none)."""
    return (value or "").strip().lower() or IDENTITY


def run_takes_uploads(run: RunStatus | None, now: Millis) -> bool:
    """Whether an upload to an artifact of `run` (None: gone) may still be recorded."""
    return run is not None and "workerGroup" in run and accepts_artifacts(run, now)


def check_upload(found: Artifact | None, token: str, run: RunStatus | None, now: Millis) -> None:
    """UploadRefused unless `token` opens `found`'s upload and its run still takes artifacts."""
    if found is None or found.storage_type != "s3":
        raise UploadRefused("the artifact this upload URL was made for does not exist")
    if found.upload_token is None:
        raise UploadRefused(
            f"artifact {found.name} was already uploaded: an upload URL writes once "
            "(createArtifact answers a new one)"
        )
    if found.upload_token != token:
        raise UploadRefused(f"a newer createArtifact for {found.name} replaced this upload URL")
    if not run_takes_uploads(run, now):
        state = "gone" if run is None else run["state"]
        raise UploadRefused(
            f"run {found.run_id} of task {found.task_id} is {state}: its artifacts can no longer be uploaded"
        )
