"""deploy/: the image's build context sends no local state, and the compose example is read with a
real YAML parser (as CI would validate it) and held to its rules: images pinned to a release,
healthchecks the services after them wait for, and a worker with no one's client."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).parent.parent
COMPOSE = ROOT / "deploy" / "docker-compose.yml"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
# What must never reach the Docker daemon: the virtualenv, a local server's data directory (its
# root token and secret key), the repository's history, caches.
NEVER_SENT = (".venv", "data", ".git", ".pytest_cache", ".mypy_cache", "bench/.peers-venv", "work")


def services() -> dict[str, Any]:
    return dict(yaml.safe_load(COMPOSE.read_text())["services"])


def dockerignore() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def ignored(path: str, patterns: list[str]) -> bool:
    """Whether Docker leaves `path` out of the context: the last pattern that matches decides."""
    verdict = False
    for pattern in patterns:
        keep = pattern.startswith("!")
        glob = pattern.removeprefix("!").rstrip("/")
        regex = re.escape(glob).replace(r"\*\*/", "(.*/)?").replace(r"\*", "[^/]*")
        if re.fullmatch(f"{regex}(/.*)?", path):
            verdict = not keep
    return verdict


def test_the_build_context_sends_what_the_image_copies_and_no_local_state() -> None:
    patterns = dockerignore()
    for path in NEVER_SENT:
        assert ignored(path, patterns), f"{path} would be sent to the Docker daemon"
    copied = [
        word
        for line in DOCKERFILE.read_text().splitlines()
        if line.startswith("COPY ")
        for word in line.split()[1:-1]
    ]
    assert copied, "the Dockerfile copies nothing?"
    for path in copied:
        assert not ignored(path.rstrip("/"), patterns), f"the Dockerfile copies {path}, which is ignored"


def test_every_image_is_pinned_to_a_release() -> None:
    images = [s["image"] for s in services().values() if "image" in s]
    from_lines = [line.split()[1] for line in DOCKERFILE.read_text().splitlines() if line.startswith("FROM ")]
    for image in [*images, *from_lines]:
        _, _, tag = image.partition(":")
        assert tag and tag != "latest", f"{image} is not pinned"
        # A release, not a moving major version: `16.4`, `3.13.7`, `RELEASE.2024-05-28T17-19-04Z`.
        assert re.match(r"(\d+\.\d+|RELEASE\.\d{4}-)", tag), f"{image}: {tag} is not a release"


def test_long_running_services_have_healthchecks_the_others_wait_for() -> None:
    found = services()
    one_shot = {"s3-bucket", "worker-setup"}
    for name, service in found.items():
        if name in one_shot or name == "worker":
            continue
        assert "healthcheck" in service, f"{name} has no healthcheck"
    for name, service in found.items():
        for needed, condition in (service.get("depends_on") or {}).items():
            wanted = "service_completed_successfully" if needed in one_shot else "service_healthy"
            assert condition == {"condition": wanted}, (name, needed, condition)


def test_the_worker_has_no_client_of_anyones_and_registers_with_a_secret() -> None:
    found = services()
    worker = found["worker"]
    assert not any(k.startswith("TASKCLUSTER_") for k in worker.get("environment") or {})
    assert "TASKYARD_ROOT_ACCESS_TOKEN" not in yaml.safe_dump(worker)
    command = worker["command"]
    assert "--register=http://queue:8080" in command
    secret = next(w.split("=", 1)[1] for w in command if w.startswith("--secret-file="))
    # worker-setup writes that secret into the volume both mount, and is the one service besides
    # the server itself that is given the root token.
    setup = found["worker-setup"]
    assert any(v.split(":")[1] == str(Path(secret).parent) for v in setup["volumes"])
    assert any(v.split(":")[1] == str(Path(secret).parent) for v in worker["volumes"])
    assert secret in setup["command"][0]
    given_root = {
        n
        for n, s in found.items()
        if "TASKYARD_ROOT_ACCESS_TOKEN" in yaml.safe_dump(s.get("environment") or {})
    }
    assert given_root == {"queue", "worker-setup"}
