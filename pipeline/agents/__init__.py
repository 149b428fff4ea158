"""Prompts, the proposer, the solver and the evidence verifier."""
