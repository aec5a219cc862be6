"""What each administrator's role may do on the admin API, by method and path.

- ``viewer``: reading (``GET``, ``HEAD``; ``POST /admin/smart-routing/simulate``
  changes nothing), but not the administrators' accounts; ``GET /admin/whoami``
  (the caller's own id and role) is a read every role makes.
- ``operator``: that, and changes to keys and organizations, and the config's
  and the prompt files' reloads.
- ``admin``: everything, and alone the administrators' accounts (reading them
  too) and every other change (prompt files, smart routing's profiles, ...).

A role that may not gets ``403 admin_role_forbidden`` naming the role and
the action.
"""

from __future__ import annotations

from switchyard.actors.control.records import ROLES
from switchyard.actors.errors import PermissionDenied

ADMINS_PATH = "/admin/admins"
WHOAMI_PATH = "/admin/whoami"
READS = frozenset({"GET", "HEAD"})
READING_POSTS = frozenset({"/admin/smart-routing/simulate"})
OPERATORS = ("admin", "operator")
ADMIN_ONLY = ("admin",)


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/")


def rule(method: str, path: str) -> tuple[tuple[str, ...], str]:
    """The roles that may make this request, and what it does in words."""
    if path == WHOAMI_PATH and method in READS:
        return ROLES, "read"
    if _under(path, ADMINS_PATH):
        return ADMIN_ONLY, "read administrators" if method in READS else "change administrators"
    if method in READS or (method == "POST" and path in READING_POSTS):
        return ROLES, "read"
    if _under(path, "/admin/keys"):
        return OPERATORS, "change keys"
    if _under(path, "/admin/organizations"):
        return OPERATORS, "change organizations"
    if path == "/admin/config/reload":
        return OPERATORS, "reload the config"
    if path == "/admin/config/prompts/reload":
        return OPERATORS, "reload the prompt files"
    if _under(path, "/admin/config/prompts"):
        return ADMIN_ONLY, "change prompt files"
    if _under(path, "/admin/smart-routing"):
        return ADMIN_ONLY, "change smart routing"
    return ADMIN_ONLY, "make changes"


def check(role: str, method: str, path: str) -> None:
    """Nothing when ``role`` may make this request; the 403 that says why not."""
    allowed, what = rule(method, path)
    if role not in allowed:
        raise PermissionDenied(f"The role '{role}' may not {what} ({method} {path})", code="admin_role_forbidden",
                               details={"role": role, "allowed_roles": list(allowed)})
