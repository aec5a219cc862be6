"""The usage ledger's stores behind ``actors.ports.UsageStore``: SQLite (the embedded default),
PostgreSQL (one ledger for a fleet) and memory; ``open_store`` picks one by ``usage.ledger``."""
