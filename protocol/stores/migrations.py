"""The SQL ledger's schema, one numbered migration at a time, per dialect.

Migration n (from 1) takes a ledger at schema version n-1 to n; ``sql.migrate``
applies the missing ones in order at ``open()``. A shipped migration never
changes: a new field of ``LedgerRecord`` is a new migration at the end of both
lists (``tests/unit/test_usage_stores.py`` checks the table has every field).
A migration is a tuple of statements, run in one transaction.

Migration 2 adds ``stored_response_owners``: which backend created which stored
response, per API key (``protocol/stores/response_owners.py``); ``seq`` orders
the rows as they were written, so the ``max_entries`` bound drops the oldest.

Migration 3 adds ``route_events``: a call's route events as JSON, for every
call but one clean attempt, so the console finds them whichever worker or
instance served the call.

Migration 4 adds ``cache_hit`` (answered from the response cache) and
``guardrails`` (the guardrails' verdicts as JSON, never the matched text).

Migration 5 adds the control plane's keys (``protocol/stores/control.py``):
``control_keys``, one row per key made through the admin API (the secret's
digest, never the secret; a rotation's previous digest beside it; the key's
settings and labels as one JSON text), and ``control_revision``, one row
whose counter every write bumps in its own transaction.

Migration 6 adds ``control_organizations``: one row per organization made
through the admin API (its budget, rate limit and labels as one JSON text);
its writes bump the same ``control_revision``.

Migration 7 adds ``control_audit``: one row per change to the control
plane's records, written in the change's own transaction (who, when, from
which address, what, the fields before and after as JSON; never a secret).

Migration 8 adds ``control_admins``: one row per administrator's account (its
role, its token's digest and prefix, never the token; when it was disabled);
its writes bump the same ``control_revision``.

Migration 9 adds ``alerts``: one row per alert (``actors/alerts/``), its
UNIQUE (event, owner, owner_id, bucket, threshold) the claim that makes one
worker of the fleet its sender; the row keeps the delivery's status.

Migration 10 adds ``cache_write_tokens``: the input tokens a call wrote to the
provider's prompt cache (Anthropic's ``cache_creation_input_tokens``,
Bedrock's ``cacheWriteInputTokens``), priced at their own rate.

Migration 11 adds ``saved_cost``: what a response cache hit saved (the
original call's cost, kept with the cached answer).

Migration 12 adds the Files and Batch APIs' tables (``protocol/stores/batches.py``):
``batch_files`` (a file's row; its bytes inline up to ``batches.inline_bytes``,
else the name of its file under ``batches.directory``), ``batches`` (a batch:
its counts, times and errors as JSON, a relayed batch's backend and id there,
a gateway-run batch's lease) and ``batch_lines`` (one row per request, by
batch and number). The indexes serve the runners' queries: runnable batches
by status and age (claims), a batch's lines by status and number; and an
owner's lists, newest first.
"""

from __future__ import annotations

Migration = tuple[str, ...]

# time and the latencies: Unix seconds and milliseconds as doubles; cost in USD, a double (None: unpriced);
# booleans 0/1; seq orders records written in the same instant as they were written.
SQLITE: tuple[Migration, ...] = (
    (
        """CREATE TABLE usage_records (
            seq INTEGER PRIMARY KEY,
            request_id TEXT NOT NULL,
            time REAL NOT NULL,
            key_id TEXT,
            organization_id TEXT,
            endpoint TEXT NOT NULL,
            model TEXT,
            served_model TEXT,
            backend TEXT,
            attempts INTEGER NOT NULL,
            status INTEGER NOT NULL,
            error_code TEXT,
            input_tokens INTEGER NOT NULL,
            output_tokens INTEGER NOT NULL,
            cached_tokens INTEGER NOT NULL,
            reasoning_tokens INTEGER NOT NULL,
            cost REAL,
            estimated INTEGER NOT NULL,
            latency_ms REAL NOT NULL,
            ttfb_ms REAL,
            stream INTEGER NOT NULL,
            purpose TEXT NOT NULL,
            trace_id TEXT,
            record_id TEXT NOT NULL UNIQUE
        )""",
        "CREATE INDEX usage_records_time ON usage_records (time)",
        "CREATE INDEX usage_records_request_id ON usage_records (request_id)",
        "CREATE INDEX usage_records_key_id ON usage_records (key_id)",
        "CREATE INDEX usage_records_model ON usage_records (model)",
    ),
    (
        """CREATE TABLE stored_response_owners (
            seq INTEGER PRIMARY KEY,
            owner TEXT NOT NULL,
            response_id TEXT NOT NULL,
            backend TEXT NOT NULL,
            created REAL NOT NULL,
            UNIQUE (owner, response_id)
        )""",
        "CREATE INDEX stored_response_owners_id ON stored_response_owners (response_id)",
        "CREATE INDEX stored_response_owners_created ON stored_response_owners (created)",
    ),
    ("ALTER TABLE usage_records ADD COLUMN route_events TEXT",),
    ("ALTER TABLE usage_records ADD COLUMN cache_hit INTEGER NOT NULL DEFAULT 0",
     "ALTER TABLE usage_records ADD COLUMN guardrails TEXT"),
    (
        # a rotation's previous secret: all three previous_* columns, or none (UNIQUE takes any number of NULLs)
        """CREATE TABLE control_keys (
            id TEXT PRIMARY KEY,
            digest BLOB NOT NULL UNIQUE,
            prefix TEXT NOT NULL,
            previous_digest BLOB UNIQUE,
            previous_prefix TEXT,
            previous_valid_until REAL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            expires_at REAL,
            revoked_at REAL,
            last_used_at REAL,
            created_by TEXT,
            settings TEXT NOT NULL,
            CHECK ((previous_digest IS NULL) = (previous_prefix IS NULL)
                   AND (previous_digest IS NULL) = (previous_valid_until IS NULL))
        )""",
        """CREATE TABLE control_revision (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            revision INTEGER NOT NULL
        )""",
        "INSERT INTO control_revision (id, revision) VALUES (1, 0)",
    ),
    (
        """CREATE TABLE control_organizations (
            id TEXT PRIMARY KEY,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            created_by TEXT,
            settings TEXT NOT NULL
        )""",
    ),
    (
        """CREATE TABLE control_audit (
            seq INTEGER PRIMARY KEY,
            at REAL NOT NULL,
            actor TEXT NOT NULL,
            address TEXT,
            action TEXT NOT NULL,
            target TEXT NOT NULL,
            target_id TEXT NOT NULL,
            before TEXT,
            after TEXT
        )""",
        "CREATE INDEX control_audit_at ON control_audit (at)",
    ),
    (
        """CREATE TABLE control_admins (
            id TEXT PRIMARY KEY,
            role TEXT NOT NULL,
            digest BLOB NOT NULL UNIQUE,
            prefix TEXT NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            created_by TEXT,
            disabled_at REAL
        )""",
    ),
    (
        """CREATE TABLE alerts (
            seq INTEGER PRIMARY KEY,
            event TEXT NOT NULL,
            owner TEXT NOT NULL,
            owner_id TEXT NOT NULL,
            bucket TEXT NOT NULL,
            threshold REAL NOT NULL,
            created_at REAL NOT NULL,
            status TEXT NOT NULL,
            attempts INTEGER NOT NULL,
            last_error TEXT,
            updated_at REAL NOT NULL,
            details TEXT NOT NULL,
            UNIQUE (event, owner, owner_id, bucket, threshold)
        )""",
        "CREATE INDEX alerts_created_at ON alerts (created_at)",
    ),
    ("ALTER TABLE usage_records ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0",),
    ("ALTER TABLE usage_records ADD COLUMN saved_cost REAL",),
    (
        """CREATE TABLE batch_files (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            purpose TEXT NOT NULL,
            filename TEXT NOT NULL,
            bytes INTEGER NOT NULL,
            created_at REAL NOT NULL,
            expires_at REAL,
            backend TEXT,
            upstream_id TEXT,
            lines INTEGER NOT NULL,
            content BLOB,
            path TEXT
        )""",
        "CREATE INDEX batch_files_owner ON batch_files (owner, created_at, id)",
        """CREATE TABLE batches (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            endpoint TEXT NOT NULL,
            input_file_id TEXT NOT NULL,
            completion_window TEXT NOT NULL,
            status TEXT NOT NULL,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            total INTEGER NOT NULL,
            completed INTEGER NOT NULL,
            failed INTEGER NOT NULL,
            metadata TEXT NOT NULL,
            model TEXT,
            output_file_id TEXT,
            error_file_id TEXT,
            errors TEXT NOT NULL,
            times TEXT NOT NULL,
            backend TEXT,
            upstream_id TEXT,
            lease_owner TEXT,
            lease_until REAL NOT NULL
        )""",
        "CREATE INDEX batches_owner ON batches (owner, created_at, id)",
        "CREATE INDEX batches_status ON batches (status, created_at, id)",
        """CREATE TABLE batch_lines (
            batch_id TEXT NOT NULL,
            number INTEGER NOT NULL,
            custom_id TEXT NOT NULL,
            url TEXT NOT NULL,
            body TEXT NOT NULL,
            status TEXT NOT NULL,
            result TEXT,
            PRIMARY KEY (batch_id, number)
        )""",
        "CREATE INDEX batch_lines_status ON batch_lines (batch_id, status, number)",
    ),
)

POSTGRESQL: tuple[Migration, ...] = (
    (
        """CREATE TABLE usage_records (
            seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            request_id text NOT NULL,
            time double precision NOT NULL,
            key_id text,
            organization_id text,
            endpoint text NOT NULL,
            model text,
            served_model text,
            backend text,
            attempts integer NOT NULL,
            status integer NOT NULL,
            error_code text,
            input_tokens integer NOT NULL,
            output_tokens integer NOT NULL,
            cached_tokens integer NOT NULL,
            reasoning_tokens integer NOT NULL,
            cost double precision,
            estimated boolean NOT NULL,
            latency_ms double precision NOT NULL,
            ttfb_ms double precision,
            stream boolean NOT NULL,
            purpose text NOT NULL,
            trace_id text,
            record_id text NOT NULL UNIQUE
        )""",
        "CREATE INDEX usage_records_time ON usage_records (time)",
        "CREATE INDEX usage_records_request_id ON usage_records (request_id)",
        "CREATE INDEX usage_records_key_id ON usage_records (key_id)",
        "CREATE INDEX usage_records_model ON usage_records (model)",
    ),
    (
        """CREATE TABLE stored_response_owners (
            seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            owner text NOT NULL,
            response_id text NOT NULL,
            backend text NOT NULL,
            created double precision NOT NULL,
            UNIQUE (owner, response_id)
        )""",
        "CREATE INDEX stored_response_owners_id ON stored_response_owners (response_id)",
        "CREATE INDEX stored_response_owners_created ON stored_response_owners (created)",
    ),
    ("ALTER TABLE usage_records ADD COLUMN route_events text",),
    ("ALTER TABLE usage_records ADD COLUMN cache_hit boolean NOT NULL DEFAULT false",
     "ALTER TABLE usage_records ADD COLUMN guardrails text"),
    (
        """CREATE TABLE control_keys (
            id text PRIMARY KEY,
            digest bytea NOT NULL UNIQUE,
            prefix text NOT NULL,
            previous_digest bytea UNIQUE,
            previous_prefix text,
            previous_valid_until double precision,
            created_at double precision NOT NULL,
            updated_at double precision NOT NULL,
            expires_at double precision,
            revoked_at double precision,
            last_used_at double precision,
            created_by text,
            settings text NOT NULL,
            CHECK ((previous_digest IS NULL) = (previous_prefix IS NULL)
                   AND (previous_digest IS NULL) = (previous_valid_until IS NULL))
        )""",
        """CREATE TABLE control_revision (
            id integer PRIMARY KEY CHECK (id = 1),
            revision bigint NOT NULL
        )""",
        "INSERT INTO control_revision (id, revision) VALUES (1, 0)",
    ),
    (
        """CREATE TABLE control_organizations (
            id text PRIMARY KEY,
            created_at double precision NOT NULL,
            updated_at double precision NOT NULL,
            created_by text,
            settings text NOT NULL
        )""",
    ),
    (
        """CREATE TABLE control_audit (
            seq bigserial PRIMARY KEY,
            at double precision NOT NULL,
            actor text NOT NULL,
            address text,
            action text NOT NULL,
            target text NOT NULL,
            target_id text NOT NULL,
            before text,
            after text
        )""",
        "CREATE INDEX control_audit_at ON control_audit (at)",
    ),
    (
        """CREATE TABLE control_admins (
            id text PRIMARY KEY,
            role text NOT NULL,
            digest bytea NOT NULL UNIQUE,
            prefix text NOT NULL,
            created_at double precision NOT NULL,
            updated_at double precision NOT NULL,
            created_by text,
            disabled_at double precision
        )""",
    ),
    (
        """CREATE TABLE alerts (
            seq bigserial PRIMARY KEY,
            event text NOT NULL,
            owner text NOT NULL,
            owner_id text NOT NULL,
            bucket text NOT NULL,
            threshold double precision NOT NULL,
            created_at double precision NOT NULL,
            status text NOT NULL,
            attempts integer NOT NULL,
            last_error text,
            updated_at double precision NOT NULL,
            details text NOT NULL,
            UNIQUE (event, owner, owner_id, bucket, threshold)
        )""",
        "CREATE INDEX alerts_created_at ON alerts (created_at)",
    ),
    ("ALTER TABLE usage_records ADD COLUMN cache_write_tokens integer NOT NULL DEFAULT 0",),
    ("ALTER TABLE usage_records ADD COLUMN saved_cost double precision",),
    (
        """CREATE TABLE batch_files (
            id text PRIMARY KEY,
            owner text NOT NULL,
            purpose text NOT NULL,
            filename text NOT NULL,
            bytes bigint NOT NULL,
            created_at double precision NOT NULL,
            expires_at double precision,
            backend text,
            upstream_id text,
            lines bigint NOT NULL,
            content bytea,
            path text
        )""",
        'CREATE INDEX batch_files_owner ON batch_files (owner, created_at, id COLLATE "C")',
        """CREATE TABLE batches (
            id text PRIMARY KEY,
            owner text NOT NULL,
            endpoint text NOT NULL,
            input_file_id text NOT NULL,
            completion_window text NOT NULL,
            status text NOT NULL,
            created_at double precision NOT NULL,
            expires_at double precision NOT NULL,
            total bigint NOT NULL,
            completed bigint NOT NULL,
            failed bigint NOT NULL,
            metadata text NOT NULL,
            model text,
            output_file_id text,
            error_file_id text,
            errors text NOT NULL,
            times text NOT NULL,
            backend text,
            upstream_id text,
            lease_owner text,
            lease_until double precision NOT NULL
        )""",
        'CREATE INDEX batches_owner ON batches (owner, created_at, id COLLATE "C")',
        'CREATE INDEX batches_status ON batches (status, created_at, id COLLATE "C")',
        """CREATE TABLE batch_lines (
            batch_id text NOT NULL,
            number bigint NOT NULL,
            custom_id text NOT NULL,
            url text NOT NULL,
            body text NOT NULL,
            status text NOT NULL,
            result text,
            PRIMARY KEY (batch_id, number)
        )""",
        "CREATE INDEX batch_lines_status ON batch_lines (batch_id, status, number)",
    ),
)
