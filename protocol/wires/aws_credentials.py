"""AWS credentials for signing Bedrock requests, from the standard sources, fetched without blocking.

Looked for in the order AWS's SDKs use: with ``aws_profile`` set, that
profile of the shared files only; otherwise the environment
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``),
then the shared files' profile (``AWS_PROFILE`` or ``default``), then role
credentials: the container credentials endpoint
(``AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`` or ``..._FULL_URI``, with
``AWS_CONTAINER_AUTHORIZATION_TOKEN`` or ``..._TOKEN_FILE``), then the
instance metadata service (IMDSv2; off with ``AWS_EC2_METADATA_DISABLED``).

The shared files (``AWS_SHARED_CREDENTIALS_FILE``, ``AWS_CONFIG_FILE``,
default ``~/.aws/credentials`` and ``~/.aws/config``) are read in a worker
thread and read again after ``FILE_TTL`` (tools rotate them). Role
credentials are fetched over httpx on Trio (its client built in a worker
thread too: that loads the CA bundle) and refreshed ``REFRESH_BEFORE``
their expiry; a failed refresh keeps credentials still valid. A profile
that needs a process, SSO or a role to assume is refused by name rather
than half supported. No credentials is ``CredentialsUnavailable``: a
transport failure of that backend's attempt (failed over like one).
"""

from __future__ import annotations

import configparser
import datetime
import functools
import os
import time
from pathlib import Path
from typing import Any, Callable, Mapping, TypeGuard

import httpx
import trio

from switchyard.protocol.wires.aws_sigv4 import Credentials

FILE_TTL = 300.0          # seconds a reading of the shared files is used
REFRESH_BEFORE = 300.0    # role credentials are fetched again this long before they expire
FETCH_TIMEOUT = 2.0       # one credential endpoint's answer
FAILURE_TTL = 5.0         # a search that found nothing is not repeated for this long (calls fail at once)
CONTAINER_HOST = "http://169.254.170.2"
IMDS = "http://169.254.169.254"
UNSUPPORTED = ("credential_process", "sso_session", "sso_start_url", "role_arn", "web_identity_token_file")


class CredentialsUnavailable(httpx.TransportError):
    """No source gave credentials (the message says what was looked at and why each failed)."""


def _expiry(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def from_json(obj: Any, where: str) -> Credentials:
    """The role credentials document both endpoints answer with."""
    if not isinstance(obj, dict) or not all(isinstance(obj.get(k), str) for k in ("AccessKeyId", "SecretAccessKey")):
        raise CredentialsUnavailable(f"{where} answered without AccessKeyId and SecretAccessKey")
    return Credentials(obj["AccessKeyId"], obj["SecretAccessKey"], obj.get("Token") or None,
                       _expiry(obj.get("Expiration")))


def from_env(env: Mapping[str, str]) -> Credentials | None:
    key, secret = env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY")
    if not key or not secret:
        return None
    return Credentials(key, secret, env.get("AWS_SESSION_TOKEN") or None)


def from_files(profile: str, env: Mapping[str, str]) -> Credentials | None:
    """The profile's static keys: the credentials file's ``[name]`` first, then the config file's
    ``[profile name]`` (``[default]`` for the default). Blocking: run in a worker thread."""
    home = Path.home() / ".aws"
    credentials = Path(env.get("AWS_SHARED_CREDENTIALS_FILE") or home / "credentials").expanduser()
    config = Path(env.get("AWS_CONFIG_FILE") or home / "config").expanduser()
    sections = [(credentials, profile), (config, profile if profile == "default" else f"profile {profile}")]
    for path, section in sections:
        parser = configparser.RawConfigParser()
        try:
            parser.read(path, encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError) as exc:
            raise CredentialsUnavailable(f"{path} cannot be read: {exc}") from None
        if not parser.has_section(section):
            continue
        values = dict(parser.items(section))
        if values.get("aws_access_key_id") and values.get("aws_secret_access_key"):
            return Credentials(values["aws_access_key_id"], values["aws_secret_access_key"],
                               values.get("aws_session_token") or None, time.time() + FILE_TTL)
        other = [k for k in UNSUPPORTED if k in values]
        if other:
            raise CredentialsUnavailable(f"profile {profile!r} in {path} uses {other[0]}, which Switchyard does not "
                                         f"run: give it static keys or use the environment or role credentials")
    return None


async def from_container(env: Mapping[str, str], client: httpx.AsyncClient) -> Credentials | None:
    relative, full = env.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"), env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI")
    if relative:
        url = CONTAINER_HOST + relative
    elif full:
        url = full
    else:
        return None
    token = env.get("AWS_CONTAINER_AUTHORIZATION_TOKEN")
    token_file = env.get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
    if token_file:
        token = (await trio.to_thread.run_sync(Path(token_file).read_text)).strip()
    headers = {"authorization": token} if token else {}
    response = await client.get(url, headers=headers)
    if response.status_code != 200:
        raise CredentialsUnavailable(f"the container credentials endpoint answered HTTP {response.status_code}")
    return from_json(response.json(), "the container credentials endpoint")


async def from_instance(env: Mapping[str, str], client: httpx.AsyncClient) -> Credentials | None:
    if env.get("AWS_EC2_METADATA_DISABLED", "").lower() == "true":
        return None
    base = (env.get("AWS_EC2_METADATA_SERVICE_ENDPOINT") or IMDS).rstrip("/")
    try:
        token = await client.put(f"{base}/latest/api/token", headers={"x-aws-ec2-metadata-token-ttl-seconds": "21600"})
    except httpx.HTTPError:
        return None   # no metadata service: not on an instance
    if token.status_code != 200:
        return None
    headers = {"x-aws-ec2-metadata-token": token.text}
    roles = await client.get(f"{base}/latest/meta-data/iam/security-credentials/", headers=headers)
    role = roles.text.strip().split("\n")[0] if roles.status_code == 200 else ""
    if not role:
        return None   # an instance without a role
    answer = await client.get(f"{base}/latest/meta-data/iam/security-credentials/{role}", headers=headers)
    if answer.status_code != 200:
        raise CredentialsUnavailable(f"the instance metadata service answered HTTP {answer.status_code} for "
                                     f"role {role!r}")
    return from_json(answer.json(), "the instance metadata service")


class CredentialProvider:
    """One backend's credentials (by ``aws_profile``): cached, refreshed before they expire."""

    def __init__(self, profile: str | None, env: Callable[[], Mapping[str, str]] = lambda: os.environ,
                 clock: Callable[[], float] = time.time) -> None:
        self.profile = profile
        self.env = env
        self.clock = clock
        self.cached: Credentials | None = None
        self.lock = trio.Lock()
        self.failed: tuple[float, CredentialsUnavailable] | None = None   # until when, and why

    def fresh(self, credentials: Credentials | None, margin: float) -> TypeGuard[Credentials]:
        return credentials is not None and (credentials.expires is None or credentials.expires - margin > self.clock())

    async def get(self) -> Credentials:
        if self.profile is None:   # the environment's are read each time: nothing to refresh
            env_credentials = from_env(self.env())
            if env_credentials is not None:
                return env_credentials
        if self.fresh(self.cached, REFRESH_BEFORE):
            return self.cached
        async with self.lock:   # one fetch for every call waiting
            if self.fresh(self.cached, REFRESH_BEFORE):
                return self.cached
            if self.failed is not None and self.failed[0] > self.clock() and not self.fresh(self.cached, 0):
                raise self.failed[1]
            try:
                self.cached = await self._resolve()
            except (CredentialsUnavailable, httpx.HTTPError, ValueError, OSError) as exc:
                if self.fresh(self.cached, 0):
                    return self.cached
                err = exc if isinstance(exc, CredentialsUnavailable) else \
                    CredentialsUnavailable(f"no AWS credentials: {type(exc).__name__}: {exc}")
                self.failed = (self.clock() + FAILURE_TTL, err)
                raise err from None
            self.failed = None
            return self.cached

    async def _resolve(self) -> Credentials:
        env = dict(self.env())
        profile = self.profile or env.get("AWS_PROFILE") or "default"
        found = await trio.to_thread.run_sync(from_files, profile, env)
        if found is not None or self.profile is not None:
            if found is None:
                raise CredentialsUnavailable(f"no AWS credentials: profile {profile!r} is in neither shared file")
            return found
        # Building a client loads the CA bundle (tens of ms of blocking file I/O): done in a worker thread.
        client = await trio.to_thread.run_sync(functools.partial(httpx.AsyncClient, timeout=FETCH_TIMEOUT,
                                                                 trust_env=False))
        async with client:
            for source in (from_container, from_instance):
                found = await source(env, client)
                if found is not None:
                    return found
        raise CredentialsUnavailable("no AWS credentials: none in the environment, the shared files (profile "
                                     f"{profile!r}), a container credentials endpoint or instance metadata")
