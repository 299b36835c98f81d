"""A task's extra.notify.email: JSON-e subject, content and link, as TaskCluster renders them."""

from __future__ import annotations

from taskyard.model.notify_routes import Email
from taskyard.notify.custom import task_email

DEFAULT = Email("default subject", "default content", ("Inspect Task", "https://ty.test/tasks/T1"))
STATUS = {"taskId": "T1", "state": "failed", "runs": [{}]}


def task(email: object) -> dict[str, object]:
    return {"metadata": {"name": "build"}, "extra": {"notify": {"email": email}}}


def test_templates_are_rendered_with_the_task_status_and_root_url() -> None:
    mail = task_email(
        DEFAULT,
        "T1",
        STATUS,
        task(
            {
                "subject": "${task.metadata.name} is ${status.state}",
                "content": "see ${rootUrl}/tasks/${taskId}",
                "link": {"text": "Logs", "href": "${rootUrl}/logs/${status.taskId}"},
            }
        ),
        "https://ty.test",
    )
    assert mail == Email(
        "build is failed", "see https://ty.test/tasks/T1", ("Logs", "https://ty.test/logs/T1")
    )


def test_what_is_not_overridden_keeps_the_default_and_a_bad_template_says_so() -> None:
    mail = task_email(DEFAULT, "T1", STATUS, task({"subject": "${nosuch.thing}"}), "https://ty.test")
    assert mail.subject.startswith("Error parsing custom message:")
    assert (mail.content, mail.link) == (DEFAULT.content, DEFAULT.link)
    assert task_email(DEFAULT, "T1", STATUS, {"metadata": {}}, "") == DEFAULT
    assert task_email(DEFAULT, "T1", STATUS, task({"link": "not a link"}), "").link == DEFAULT.link
