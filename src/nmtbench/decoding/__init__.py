"""Decoding: search over any model through the shared interface."""
