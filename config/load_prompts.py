"""Validation of ``global_prompts``, and the sandbox every prompt file path goes through.

``Sandbox.resolve`` is the one place a prompt file name becomes a real path:
config loading, the PromptStore's reads and polls, and the admin GET/PUT all
call it, so a rule (relative only, no ``..``, no symlink out of
``prompts_dir``, 1 MiB per file) cannot hold in one place and leak in another.
"""

from __future__ import annotations

import hashlib
from pathlib import Path, PurePosixPath
from typing import Any

from attrs import frozen

from switchyard.config import rules
from switchyard.config.fields import read
from switchyard.config.prompts import (
    MAX_CACHE_BYTES,
    MAX_FILE_BYTES,
    GlobalPrompts,
    PromptSource,
)
from switchyard.config.rules import Invalid, Problems, Reader, child
from switchyard.config.watch import FileStamp, stamp


class PromptFileError(ValueError):
    """A prompt path or file broke a rule; ``rule`` names which, for the admin API's error code."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule


@frozen
class PromptText:
    """A prompt file's text as read, with what the admin listing and the poll need."""

    text: str
    size: int                       # bytes on disk
    sha256: str                     # of the bytes on disk, hex
    stamp: FileStamp | None         # taken before the read: a later change shows on the next poll


def decode(data: bytes, st: FileStamp | None = None) -> PromptText:
    if len(data) > MAX_FILE_BYTES:
        raise PromptFileError("max_size", f"is {len(data)} bytes; a prompt file may be at most 1 MiB "
                                          f"({MAX_FILE_BYTES} bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PromptFileError("utf8_text", f"must be UTF-8 text; byte {exc.start} is not") from None
    if "\x00" in text:
        raise PromptFileError("utf8_text", "must be UTF-8 text; it holds NUL bytes")
    return PromptText(text.removeprefix("\ufeff"), len(data), hashlib.sha256(data).hexdigest(), st)


MAX_NAME_BYTES = 255     # one file or directory name (NAME_MAX on Linux and macOS)
MAX_PATH_BYTES = 1024    # a whole prompt path, well under PATH_MAX with the sandbox's own path in front


def lexical(name: str, where: str) -> PurePosixPath:
    """The rules a name must pass before it touches the disk: a relative path without '..'."""
    if not name or "\x00" in name:
        raise PromptFileError("file_name", "must name a file")
    path = PurePosixPath(name)
    # Past these the file system refuses with OSError ("File name too long"): refused here, by rule.
    if len(name.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES or \
            any(len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES for part in path.parts):
        raise PromptFileError("file_name", f"must be at most {MAX_PATH_BYTES} bytes, each name in it at most "
                                           f"{MAX_NAME_BYTES} bytes (got {len(name)} characters)")
    if path.is_absolute():
        raise PromptFileError("relative_only", f"must be a relative path inside {where}, got {name!r}")
    if ".." in path.parts:
        raise PromptFileError("no_traversal", f"must not contain '..' (prompt files stay inside {where}), got {name!r}")
    return path


@frozen
class Sandbox:
    """``prompts_dir`` under the config directory: the only place prompt files may be."""

    base_dir: Path                  # absolute config directory
    prompts_dir: PurePosixPath      # relative, no '..' (checked when loading)

    @classmethod
    def of(cls, config: GlobalPrompts) -> "Sandbox":
        return cls(Path(config.base_dir or ".").absolute(), PurePosixPath(config.prompts_dir))

    def root(self) -> Path:
        # Resolved on every call: prompts_dir itself may be a symlink the operator re-points.
        return (self.base_dir / self.prompts_dir).resolve()

    def resolve(self, name: str) -> Path:
        """The real path of ``name`` (relative to prompts_dir), or PromptFileError naming the rule."""
        path = lexical(name, f"the sandbox {self.base_dir / self.prompts_dir}")
        try:
            root = self.root()
            real = (root / path).resolve()
        except (OSError, RuntimeError) as exc:      # a symlink loop, a permission error
            raise PromptFileError("inside_sandbox", f"cannot be resolved: {exc}") from None
        if real == root:
            raise PromptFileError("file_name", f"must name a file, not the sandbox directory, got {name!r}")
        if root not in real.parents:
            raise PromptFileError("inside_sandbox", f"resolves outside the sandbox {root} (through a symlink), "
                                                    f"got {name!r}")
        return real

    def read(self, name: str) -> PromptText:
        """Read one prompt file (blocking: async callers run it in a worker thread)."""
        real = self.resolve(name)
        st = stamp(real)
        if st is None:
            raise PromptFileError("exists", f"{name!r} does not exist in the sandbox {self.root()}")
        if not real.is_file():
            raise PromptFileError("regular_file", f"{name!r} is not a regular file")
        if st.size > MAX_FILE_BYTES:
            raise PromptFileError("max_size", f"is {st.size} bytes; a prompt file may be at most 1 MiB "
                                              f"({MAX_FILE_BYTES} bytes)")
        try:
            with real.open("rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise PromptFileError("exists", f"{name!r} cannot be read: {exc.strerror or exc}") from None
        return decode(data, st)

    def from_admin(self, path: str) -> str:
        """An admin path (relative to the config directory) as a name inside prompts_dir."""
        p = lexical(path, "the config directory")
        prefix = self.prompts_dir.parts
        if p.parts[:len(prefix)] != prefix or len(p.parts) == len(prefix):
            raise PromptFileError("inside_sandbox", f"is not a file under prompts_dir {self.admin_path('') or '.'}")
        return PurePosixPath(*p.parts[len(prefix):]).as_posix()

    def admin_path(self, name: str) -> str:
        """``name`` (relative to prompts_dir) as the admin API spells it: relative to the config directory."""
        parts = (*self.prompts_dir.parts, *PurePosixPath(name).parts)
        return PurePosixPath(*parts).as_posix() if parts else ""


# --- loading ---------------------------------------------------------------------

def _inline(value: Any) -> str:
    """Any string, even empty (an explicit "no global prompt here"), at most 1 MiB."""
    if not isinstance(value, str):
        raise Invalid(f"must be a string, got {rules.type_name(value)}")
    if len(value.encode()) > MAX_FILE_BYTES:
        raise Invalid(f"must be at most 1 MiB ({MAX_FILE_BYTES} bytes) like a prompt file")
    return value


class _Files:
    """Reads each named file once through the sandbox; keeps the total under the cache limit."""

    def __init__(self, sandbox: Sandbox, check_files: bool) -> None:
        self.sandbox = sandbox
        self.check_files = check_files
        self.sizes: dict[str, int] = {}

    def rule(self, value: Any) -> str:
        name = PurePosixPath(rules.string()(value)).as_posix()
        try:
            if not self.check_files:         # prompts_dir is invalid: the lexical rules only
                lexical(name, "prompts_dir")
                return name
            if name not in self.sizes:
                size = self.sandbox.read(name).size
                total = sum(self.sizes.values()) + size
                if total > MAX_CACHE_BYTES:
                    raise Invalid(f"{name!r} ({size} bytes) would take the prompt cache to {total} bytes, "
                                  f"past its 50 MiB limit ({MAX_CACHE_BYTES} bytes)")
                self.sizes[name] = size
        except PromptFileError as exc:
            raise Invalid(str(exc)) from None
        return name


def _source(r: Reader, inline_key: str, file_key: str, files: _Files) -> PromptSource | None:
    prompt = r.get(inline_key, _inline, None)
    prompt_file = r.get(file_key, files.rule, None)
    if prompt is None and prompt_file is None:
        return None
    return PromptSource(prompt=prompt, prompt_file=prompt_file)


def _named(r: Reader, files: _Files) -> dict[str, PromptSource]:
    out: dict[str, PromptSource] = {}
    for key in list(r.raw):
        if not isinstance(key, str) or not key:
            r.problems.error(child(r.path, str(key)), "must be a name (a non-empty string)")
            continue
        entry = r.section(key)
        source = _source(entry, "prompt", "prompt_file", files)
        failed = any(p == entry.path or p.startswith(entry.path + ".") for p in r.problems.failed_paths)
        if source is not None:
            out[key] = source
        elif not failed:             # an invalid value was reported already
            r.problems.error(entry.path, "needs prompt or prompt_file")
        entry.finish()
    r.finish()
    return out


def global_prompts(r: Reader, base_dir: Path) -> GlobalPrompts:
    """Special: prompt files are read through the sandbox that ``prompts_dir`` draws."""
    prompts_dir = read(r, GlobalPrompts, "prompts_dir")
    dir_ok = child(r.path, "prompts_dir") not in r.problems.failed_paths
    sandbox = Sandbox(base_dir.absolute(), PurePosixPath(prompts_dir))
    files = _Files(sandbox, check_files=dir_ok)
    out = GlobalPrompts(
        enabled=bool(r.raw),
        default=_source(r, "default", "default_file", files),
        backends=_named(r.section("backends"), files),
        models=_named(r.section("models"), files),
        prompts_dir=prompts_dir,
        base_dir=str(base_dir.absolute()),
        merge_strategy=read(r, GlobalPrompts, "merge_strategy"),
        separator=read(r, GlobalPrompts, "separator"),
    )
    r.finish()
    root = base_dir / prompts_dir
    if dir_ok and r.has("prompts_dir") and not root.is_dir():
        r.problems.warn(child(r.path, "prompts_dir"), f"{root} is not a directory: no prompt file can be "
                                                      "read or written there until it is")
    return out


def check_backends(prompts: GlobalPrompts, backend_names: set[str], problems: Problems) -> None:
    """A backend prompt may only name a configured backend (a typo would silently drop the policy)."""
    for name in prompts.backends:
        if name not in backend_names:
            problems.error(f"global_prompts.backends.{name}", f"no backend is named {name!r}")
