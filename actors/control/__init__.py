"""The control plane: keys (and, next, organizations, admins, the audit log) kept as records in the usage
ledger's database, served to the request path from an immutable view in memory."""
