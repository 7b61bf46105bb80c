"""Cycle-level PTX simulator: front end, functional model, timing model."""
