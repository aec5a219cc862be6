"""Guardrails: built-in detectors and webhooks on what a call sends (input) and gets back (output)."""
