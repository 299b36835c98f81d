"""The error hierarchy. Every error a client can cause is one of these.

    TaskyardError                      500 InternalServerError
    ├── InputError                     400 InputError             (semantic: the request makes no sense)
    │   ├── InvalidRequestArguments    400 InvalidRequestArguments (URL parameters and query)
    │   ├── InputValidationError       400 InputValidationError    (body fails its schema)
    │   └── MalformedPayload           400 MalformedPayload        (body is not JSON)
    ├── AuthenticationFailed           401 AuthenticationFailed
    ├── InsufficientScopes             403 InsufficientScopes
    ├── ResourceNotFound               404 ResourceNotFound
    ├── MethodNotAllowed               405 MethodNotAllowed
    ├── RequestConflict                409 RequestConflict
    ├── ResourceExpired                410 ResourceExpired
    ├── InputTooLarge                  413 InputTooLarge
    ├── RangeNotSatisfiable            416 RangeNotSatisfiable    (a blob download's Range)
    ├── Unavailable                    503 ServiceUnavailable     (a backend is down: try again)
    └── ConfigError                    (never an HTTP answer: bad configuration at start-up)

The API turns any of them into TaskCluster's body `{"code", "message", "requestInfo"}`; one that
sets `retry_after` also answers a `Retry-After` header.
"""

from __future__ import annotations


class TaskyardError(Exception):
    """Something went wrong inside taskyard."""

    code = "InternalServerError"
    status = 500
    retry_after: int | None = None  # seconds a client should wait before it tries again, if known

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or self.code).strip())

    @property
    def message(self) -> str:
        return str(self.args[0])


class InputError(TaskyardError):
    """The request is not valid."""

    code = "InputError"
    status = 400


class InvalidRequestArguments(InputError):
    """A URL parameter or query argument is not valid."""

    code = "InvalidRequestArguments"


class InputValidationError(InputError):
    """The request body does not match its schema."""

    code = "InputValidationError"


class MalformedPayload(InputError):
    """The request body is not valid JSON."""

    code = "MalformedPayload"


class AuthenticationFailed(TaskyardError):
    """The request's credentials were not accepted."""

    code = "AuthenticationFailed"
    status = 401


class InsufficientScopes(TaskyardError):
    """The credentials do not carry the scopes this request needs."""

    code = "InsufficientScopes"
    status = 403


class ResourceNotFound(TaskyardError):
    """No such resource."""

    code = "ResourceNotFound"
    status = 404


class MethodNotAllowed(TaskyardError):
    """This route does not answer that HTTP method."""

    code = "MethodNotAllowed"
    status = 405


class RequestConflict(TaskyardError):
    """The request conflicts with the resource's current state."""

    code = "RequestConflict"
    status = 409


class ResourceExpired(TaskyardError):
    """The resource has expired."""

    code = "ResourceExpired"
    status = 410


class InputTooLarge(TaskyardError):
    """The request body is larger than allowed."""

    code = "InputTooLarge"
    status = 413


class RangeNotSatisfiable(TaskyardError):
    """The requested byte range is not within the blob."""

    code = "RangeNotSatisfiable"
    status = 416


class Unavailable(TaskyardError):
    """A backend taskyard depends on is unavailable; try again shortly."""

    code = "ServiceUnavailable"
    status = 503


class ConfigError(TaskyardError):
    """A configuration value is not valid."""

    code = "ConfigError"

    def __init__(self, key: str, value: object, rule: str) -> None:
        super().__init__(f"configuration {key}={value!r} is not valid: {rule}")
        self.key = key
