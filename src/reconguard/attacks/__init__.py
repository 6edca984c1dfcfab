"""Attacks: reconstruction from embeddings (more rooms arrive with later issues)."""
