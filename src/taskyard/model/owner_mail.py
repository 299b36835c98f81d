"""Mail to the owner of a hook or a worker pool about an error, as TaskCluster sends it when the
hook's or pool's `emailOnError` is true.

Services take an `OwnerMail`: a function that sends (in the background) one message to an
address, given its subject and Markdown content. `taskyard serve` builds it on the notify service
(`--smtp-url`); without an SMTP server it only logs what it would have sent.
"""

from __future__ import annotations

from collections.abc import Callable

OwnerMail = Callable[[str, str, str], None]  # (address, subject, Markdown content)


def no_mail(address: str, subject: str, content: str) -> None:
    """Send nothing (a service built without the notify service, as in a test)."""
