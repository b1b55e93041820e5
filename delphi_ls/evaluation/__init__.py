"""Evaluation: ARB scoring, same-run baselines and samples mined from a repository's history."""
