"""Actors: one per concern, each owning its connections (pykka threads)."""
