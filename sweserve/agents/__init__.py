"""Candidates: the `Agent` protocol and every kind of candidate (reference, command, API, human, predictions).

Rule: agents see the `Sandbox` protocol (`environment/sandbox.py`), never a container engine, and nothing of
`evaluation/`. The trial takes the submission from the sandbox; an agent never grades itself.
"""
