"""Everything that speaks HTTP: the doors clients come in through, the wires out to backends, the admin
API, serving (the ASGI app, workers, CLI, logs) and the simulated backends. Nothing below imports it."""
