"""The admin API behind ``admin.token`` or administrators' accounts: config, backends, stats, route events,
prompt files, smart routing, keys, organizations, administrators."""
