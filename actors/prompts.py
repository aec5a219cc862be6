"""PromptStore: the global prompt texts, held in memory for the hot path.

``prompt_for`` is two or three dict lookups and never touches the disk; the
texts get there four ways: the config loads (``reconfigure``, on start and on
every hot reload), an admin PUT (disk and cache together, so the next request
already sees it), ``reload`` (admin POST), and the poll in ``run``, which
stats every prompt file each ``interval`` and re-reads only a file whose
size, mtime or inode moved -- edits made by other means (an editor, a
ConfigMap update) apply on the next request after the poll.

A file that turns bad (deleted, too large, not UTF-8, a symlink re-pointed
out of the sandbox) keeps its last good text: a policy prompt should not
vanish because an editor was half-way through a save. The error is logged
once and shown in the admin listing.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any, Mapping

import trio

from switchyard.actors.routing.prompt_merge import Moved, client_indices, inject
from switchyard.config.load_prompts import PromptFileError, PromptText, Sandbox, decode
from switchyard.config.prompts import MAX_CACHE_BYTES, GlobalPrompts, PromptSource
from switchyard.config.watch import FileStamp, stamp

log = logging.getLogger("switchyard.prompts")

POLL_INTERVAL = 1.0
ADMIN_SUFFIXES = (".md", ".markdown", ".txt")   # what admin GET/PUT may touch besides configured files


class PromptStore:
    name = "prompts"

    def __init__(self, config: GlobalPrompts, interval: float = POLL_INTERVAL) -> None:
        self.interval = interval
        self.config = GlobalPrompts()
        self.sandbox = Sandbox.of(self.config)
        self._files: dict[str, PromptText] = {}           # prompt file name -> text as read
        self._texts: dict[str, str] = {}                  # prompt file name -> text as served
        self._inline: dict[str, str] = {}                 # inline prompt -> text as served
        self._errors: dict[str, tuple[str, FileStamp | None]] = {}   # name -> (error, stamp it was seen at)
        self.reconfigure(config)

    # --- the hot path -----------------------------------------------------------------

    def prompt_for(self, model: str, backend: str) -> str | None:
        """The global prompt for ``model`` on ``backend``: model > backend > default, and at
        each level the file before the inline text. A level whose file failed to load and has
        no inline text is skipped; an empty text means "none here" and stops the search."""
        c = self.config
        for source in (c.models.get(model), c.backends.get(backend), c.default):
            if source is None:
                continue
            text = self._texts.get(source.prompt_file) if source.prompt_file is not None else None
            if text is None and source.prompt is not None:
                text = self._inline[source.prompt]
            if text is not None:
                return text or None
        return None

    def client_indices(self, payload: Mapping[str, Any], model: str, backend: str) -> Moved | None:
        """How ``merge_into`` moves ``payload``'s messages (``prompt_merge.client_indices``); None: it does not."""
        text = self.prompt_for(model, backend)
        if text is None:
            return None
        return client_indices(payload, text, self.config.merge_strategy, self.config.separator)

    def merge_into(self, payload: Mapping[str, Any], model: str, backend: str) -> dict[str, Any]:
        """``payload`` (never mutated) with the prompt for ``model`` on ``backend`` merged in."""
        text = self.prompt_for(model, backend)
        if text is None:
            return dict(payload)
        return inject(payload, text, self.config.merge_strategy, self.config.separator)

    # --- config -----------------------------------------------------------------------

    def reconfigure(self, config: GlobalPrompts) -> None:
        """Take a new config (hot reload). Files whose stamp did not move keep their cached
        text; the rest are read now, as the config loader just did. A file that fails now
        keeps its cached text if it had one."""
        if config == self.config:
            return
        sandbox = Sandbox.of(config)
        old = self._files if sandbox == self.sandbox else {}
        self.config, self.sandbox = config, sandbox
        self._files, self._texts, self._errors = {}, {}, {}
        sources = [config.default, *config.backends.values(), *config.models.values()]
        self._inline = {s.prompt: s.prompt.strip() for s in sources if s is not None and s.prompt is not None}
        for name in config.files():
            kept = old.get(name)
            try:
                current = stamp(sandbox.resolve(name))
                text = kept if kept is not None and kept.stamp == current else sandbox.read(name)
                self._check_cache(name, text.size)
            except PromptFileError as exc:
                if kept is not None:
                    self._set(name, kept)
                self._fail(name, str(exc), None)
                continue
            self._set(name, text)

    def cache_bytes(self) -> int:
        return sum(t.size for t in self._files.values())

    def _check_cache(self, name: str, size: int) -> None:
        total = self.cache_bytes() - (self._files[name].size if name in self._files else 0) + size
        if total > MAX_CACHE_BYTES:
            raise PromptFileError("cache_limit", f"{self.sandbox.admin_path(name)!r} ({size} bytes) would take the "
                                                 f"prompt cache to {total} bytes, past its 50 MiB limit "
                                                 f"({MAX_CACHE_BYTES} bytes)")

    def _set(self, name: str, text: PromptText) -> None:
        self._files[name] = text
        self._texts[name] = text.text.strip()
        self._errors.pop(name, None)

    def _fail(self, name: str, error: str, at: FileStamp | None) -> None:
        """Record (and log, once per distinct error) a file that could not be (re)loaded."""
        if self._errors.get(name, ("",))[0] != error:
            kept = "keeping its last good text" if name in self._files else "its level falls back"
            log.error("global_prompts: prompt file %s: %s; %s", self.sandbox.admin_path(name), error, kept)
        self._errors[name] = (error, at)

    # --- picking up changes -------------------------------------------------------------

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started(self)
        while True:
            await trio.sleep(self.interval)
            self.poll()

    def poll(self) -> list[str]:
        """Re-read each prompt file whose stamp moved; returns the names reloaded.

        Blocking, like ConfigWatcher's reload: a stat per file, and a read (at most 1 MiB)
        only of a file that changed -- rare and small, so not worth a worker thread.
        """
        changed = []
        for name in self.config.files():
            before = self._files.get(name)
            try:
                current = stamp(self.sandbox.resolve(name))
            except PromptFileError as exc:       # e.g. a symlink re-pointed out of the sandbox
                self._fail(name, str(exc), None)
                continue
            if current == (before.stamp if before else None) or current == self._errors.get(name, ("", 0))[1]:
                continue
            if current is None:
                self._fail(name, "was deleted", None)
                continue
            try:
                text: PromptText | PromptFileError = self.sandbox.read(name)
            except PromptFileError as exc:
                text = exc
            if self._take(name, before, self.config, text, current):
                changed.append(name)
                log.info("global_prompts: prompt file %s changed on disk: reloaded", self.sandbox.admin_path(name))
        return changed

    def _take(self, name: str, before: PromptText | None, config: GlobalPrompts,
              text: PromptText | PromptFileError, current: FileStamp | None) -> bool:
        """Apply a fresh read of ``name`` unless the config or the file changed since; True if new text."""
        if config is not self.config or self._files.get(name) is not before:
            return False                 # a reconfigure or an admin PUT got there first
        if isinstance(text, PromptFileError):
            self._fail(name, str(text), current)
            return False
        if before is not None and text.sha256 == before.sha256:
            self._set(name, text)        # touched, not changed: remember the new stamp
            return False
        try:
            self._check_cache(name, text.size)
        except PromptFileError as exc:
            self._fail(name, str(exc), current)
            return False
        self._set(name, text)
        return True

    async def reload(self) -> dict[str, Any]:
        """Re-read every prompt file from disk now (admin POST .../reload), in a worker thread."""
        changed, errors = [], []
        config = self.config
        for name in config.files():
            before = self._files.get(name)
            try:
                text: PromptText | PromptFileError = await trio.to_thread.run_sync(self.sandbox.read, name)
            except PromptFileError as exc:
                text = exc
            if self._take(name, before, config, text, None):
                changed.append(self.sandbox.admin_path(name))
            elif name in self._errors:
                errors.append({"path": self.sandbox.admin_path(name), "error": self._errors[name][0]})
        return {"result": "partial" if errors else "reloaded", "files": len(config.files()),
                "changed": changed, "errors": errors, "cache_bytes": self.cache_bytes()}

    # --- admin ----------------------------------------------------------------------------

    def listing(self) -> dict[str, Any]:
        """Every configured prompt with its size and hash, never its text."""
        c = self.config
        levels: list[tuple[str, str | None, PromptSource | None]] = [("default", None, c.default)]
        levels += [("backend", name, s) for name, s in sorted(c.backends.items())]
        levels += [("model", name, s) for name, s in sorted(c.models.items())]
        prompts = []
        for level, name, source in levels:
            if source is None:
                continue
            file_ok = source.prompt_file is not None and source.prompt_file in self._files
            if source.prompt_file is not None:
                loaded = self._files.get(source.prompt_file)
                error = self._errors.get(source.prompt_file, (None,))[0]
                prompts.append({"level": level, "name": name, "source": "file",
                                "path": self.sandbox.admin_path(source.prompt_file),
                                "size": loaded.size if loaded else None,
                                "sha256": loaded.sha256[:16] if loaded else None,
                                "active": file_ok, "error": error})
            if source.prompt is not None:
                data = source.prompt.encode()
                prompts.append({"level": level, "name": name, "source": "inline", "path": None,
                                "size": len(data), "sha256": hashlib.sha256(data).hexdigest()[:16],
                                "active": not file_ok, "error": None})
        try:
            root = str(self.sandbox.root())
        except (OSError, RuntimeError):          # prompts_dir is a symlink loop: show it as configured
            root = str(self.sandbox.base_dir / self.sandbox.prompts_dir)
        return {"enabled": c.enabled, "sandbox": root, "prompts_dir": c.prompts_dir,
                "merge_strategy": c.merge_strategy.value, "separator": c.separator,
                "cache_bytes": self.cache_bytes(), "cache_limit_bytes": MAX_CACHE_BYTES, "prompts": prompts}

    def admin_name(self, path: str) -> str:
        """An admin path as a prompt file name, or PromptFileError naming the rule it breaks."""
        if not self.config.enabled:
            raise PromptFileError("not_configured", "global_prompts is not configured: the prompt file routes "
                                                    "are off until the config has a global_prompts section")
        name = self.sandbox.from_admin(path)
        if name in self.config.files():
            return name
        if PurePosixPath(self.config.prompts_dir or ".") == PurePosixPath("."):
            # The sandbox is the config directory itself: only the configured prompt files, so
            # the admin API can never read or write the config or anything next to it.
            raise PromptFileError("admin_file_type", "is not a configured prompt file; other files can be "
                                                     "read or created only when global_prompts.prompts_dir "
                                                     "is a directory of its own")
        if not name.lower().endswith(ADMIN_SUFFIXES):
            raise PromptFileError("admin_file_type", "is neither a configured prompt file nor a "
                                                     f"{', '.join(ADMIN_SUFFIXES)} file")
        return name

    async def read_file(self, path: str) -> dict[str, Any]:
        name = self.admin_name(path)
        text = await trio.to_thread.run_sync(self.sandbox.read, name)
        return {"path": self.sandbox.admin_path(name), "content": text.text, "size": text.size,
                "sha256": text.sha256[:16], "in_use": name in self.config.files()}

    async def write_file(self, path: str, content: str) -> dict[str, Any]:
        """Write atomically (temp file + rename in the same directory); a configured file's
        new text is served from the next request on."""
        name = self.admin_name(path)
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError:
            raise PromptFileError("utf8_text", "must be UTF-8 text; it holds a lone surrogate") from None
        text = decode(data)
        in_use = name in self.config.files()
        if in_use:
            self._check_cache(name, text.size)
        real = self.sandbox.resolve(name)
        if not real.parent.is_dir():
            raise PromptFileError("exists", "is in a directory that does not exist; a PUT creates files, "
                                            "not directories")
        if real.is_dir():
            raise PromptFileError("regular_file", "is a directory")
        config = self.config
        try:
            created = await trio.to_thread.run_sync(_atomic_write, real, data)
        except OSError as exc:
            raise PromptFileError("write_failed", f"could not be written: {exc.strerror or exc}") from None
        if config is self.config and name in config.files():
            self._set(name, PromptText(text.text, text.size, text.sha256, stamp(real)))
        return {"path": self.sandbox.admin_path(name), "size": text.size, "sha256": text.sha256[:16],
                "created": created, "in_use": in_use}


def _atomic_write(real: Path, data: bytes) -> bool:
    """Blocking: write ``data`` to a temp file beside ``real`` and rename it over; True if new."""
    created = not real.exists()
    mode = 0o644 if created else real.stat().st_mode & 0o777
    fd, tmp = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".tmp", dir=real.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, real)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return created

