"""Where a bedrock backend's AWS credentials come from, and when they are fetched again.

Role credentials are served by real endpoints on 127.0.0.1 (``tests/aws_credentials_fake.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from switchyard.protocol.wires.aws_credentials import REFRESH_BEFORE, CredentialProvider, CredentialsUnavailable
from tests.aws_credentials_fake import FakeCredentialEndpoints, running


def isolated(tmp_path: Path, **env: str) -> dict[str, str]:
    """An environment that sees no AWS setup of this machine: no shared files, no instance metadata."""
    return {"AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "credentials"), "AWS_CONFIG_FILE": str(tmp_path / "config"),
            "AWS_EC2_METADATA_DISABLED": "true", **env}


class Clock:
    def __init__(self) -> None:
        import time
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


async def test_the_environment_gives_keys_and_session_token(tmp_path):
    env = isolated(tmp_path, AWS_ACCESS_KEY_ID="AKENV", AWS_SECRET_ACCESS_KEY="s", AWS_SESSION_TOKEN="t")
    got = await CredentialProvider(None, env=lambda: env).get()
    assert (got.access_key, got.secret_key, got.token) == ("AKENV", "s", "t")


async def test_a_named_profile_is_read_from_the_credentials_file_then_the_config_file(tmp_path):
    (tmp_path / "credentials").write_text("[default]\naws_access_key_id = AKDEF\naws_secret_access_key = d\n"
                                          "[prod]\naws_access_key_id = AKPROD\naws_secret_access_key = p\n"
                                          "aws_session_token = ptok\n")
    (tmp_path / "config").write_text("[profile staging]\naws_access_key_id = AKSTG\naws_secret_access_key = s\n")
    env = isolated(tmp_path, AWS_ACCESS_KEY_ID="AKENV", AWS_SECRET_ACCESS_KEY="ignored-with-a-profile")
    prod = await CredentialProvider("prod", env=lambda: env).get()
    staging = await CredentialProvider("staging", env=lambda: env).get()
    assert (prod.access_key, prod.token, staging.access_key) == ("AKPROD", "ptok", "AKSTG")


async def test_without_a_profile_the_environment_comes_before_the_files_and_aws_profile_picks_one(tmp_path):
    (tmp_path / "credentials").write_text("[default]\naws_access_key_id = AKDEF\naws_secret_access_key = d\n"
                                          "[other]\naws_access_key_id = AKOTHER\naws_secret_access_key = o\n")
    assert (await CredentialProvider(None, env=lambda: isolated(tmp_path)).get()).access_key == "AKDEF"
    env = isolated(tmp_path, AWS_PROFILE="other")
    assert (await CredentialProvider(None, env=lambda: env).get()).access_key == "AKOTHER"
    env = isolated(tmp_path, AWS_ACCESS_KEY_ID="AKENV", AWS_SECRET_ACCESS_KEY="e")
    assert (await CredentialProvider(None, env=lambda: env).get()).access_key == "AKENV"


async def test_a_profile_that_needs_a_process_or_sso_is_refused_by_name(tmp_path):
    (tmp_path / "config").write_text("[profile sso]\nsso_session = corp\n")
    with pytest.raises(CredentialsUnavailable, match="sso_session"):
        await CredentialProvider("sso", env=lambda: isolated(tmp_path)).get()


async def test_a_missing_profile_says_so(tmp_path):
    with pytest.raises(CredentialsUnavailable, match="'absent' is in neither shared file"):
        await CredentialProvider("absent", env=lambda: isolated(tmp_path)).get()


async def test_the_container_endpoint_is_asked_with_its_authorization_token(tmp_path):
    async with running(FakeCredentialEndpoints(token="Bearer ctok")) as endpoint:
        env = isolated(tmp_path, AWS_CONTAINER_CREDENTIALS_FULL_URI=endpoint.url + "/creds",
                       AWS_CONTAINER_AUTHORIZATION_TOKEN="Bearer ctok")
        got = await CredentialProvider(None, env=lambda: env).get()
    assert (got.access_key, got.secret_key, got.token) == ("AKID1", "secret1", "token1") and got.expires is not None


async def test_the_container_token_may_come_from_a_file(tmp_path):
    (tmp_path / "token").write_text("Bearer from-file\n")
    async with running(FakeCredentialEndpoints(token="Bearer from-file")) as endpoint:
        env = isolated(tmp_path, AWS_CONTAINER_CREDENTIALS_FULL_URI=endpoint.url + "/creds",
                       AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=str(tmp_path / "token"))
        assert (await CredentialProvider(None, env=lambda: env).get()).access_key == "AKID1"


async def test_instance_metadata_is_asked_with_an_imdsv2_token(tmp_path):
    async with running(FakeCredentialEndpoints()) as endpoint:
        env = isolated(tmp_path, AWS_EC2_METADATA_SERVICE_ENDPOINT=endpoint.url)
        env.pop("AWS_EC2_METADATA_DISABLED")
        got = await CredentialProvider(None, env=lambda: env).get()
    assert (got.access_key, got.token) == ("AKID1", "token1")
    assert ("PUT", "/latest/api/token") in endpoint.requests


async def test_role_credentials_are_cached_then_fetched_again_before_they_expire(tmp_path):
    clock = Clock()
    async with running(FakeCredentialEndpoints(lifetime=3600)) as endpoint:
        env = isolated(tmp_path, AWS_CONTAINER_CREDENTIALS_FULL_URI=endpoint.url + "/creds")
        provider = CredentialProvider(None, env=lambda: env, clock=clock)
        first = await provider.get()
        clock.now += 3600 - REFRESH_BEFORE - 60
        assert (await provider.get()).access_key == first.access_key == "AKID1"
        clock.now += 120   # inside the refresh window
        assert (await provider.get()).access_key == "AKID2"


async def test_a_failed_refresh_keeps_credentials_still_valid(tmp_path):
    clock = Clock()
    async with running(FakeCredentialEndpoints(lifetime=3600)) as endpoint:
        env = isolated(tmp_path, AWS_CONTAINER_CREDENTIALS_FULL_URI=endpoint.url + "/creds")
        provider = CredentialProvider(None, env=lambda: env, clock=clock)
        await provider.get()
        endpoint.fail = True
        clock.now += 3600 - 60   # in the refresh window, not yet expired
        assert (await provider.get()).access_key == "AKID1"
        clock.now += 120         # expired: nothing valid is left
        with pytest.raises(CredentialsUnavailable, match="HTTP 500"):
            await provider.get()


async def test_no_source_at_all_is_one_clear_error(tmp_path):
    env: dict[str, Any] = isolated(tmp_path)
    with pytest.raises(CredentialsUnavailable, match="none in the environment, the shared files"):
        await CredentialProvider(None, env=lambda: env).get()


async def test_role_credentials_are_fetched_without_blocking_the_event_loop(tmp_path, monkeypatch):
    """The fetching client is built in a worker thread: building one loads the CA bundle from disk."""
    import threading

    import httpx

    built_on: list[threading.Thread] = []
    real = httpx.AsyncClient

    def recording(*args: Any, **kwargs: Any) -> httpx.AsyncClient:
        built_on.append(threading.current_thread())
        return real(*args, **kwargs)

    monkeypatch.setattr(httpx, "AsyncClient", recording)
    async with running(FakeCredentialEndpoints()) as endpoint:
        env = isolated(tmp_path, AWS_CONTAINER_CREDENTIALS_FULL_URI=endpoint.url + "/creds")
        assert (await CredentialProvider(None, env=lambda: env).get()).access_key == "AKID1"
    assert built_on and threading.main_thread() not in built_on
