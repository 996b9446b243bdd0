"""Env wrappers (Gymnasium API)."""
