"""The admin API behind ``admin.token``: config, backends, stats, route events, prompt files, smart routing."""
