"""Pieces that several algorithms share."""
