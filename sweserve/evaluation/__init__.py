"""The trial pipeline and everything it decides: trial, submission, verifier, validation, executors, results.

Rule: a trial resolves its inputs once and goes down: sandboxes and hosts only through their protocols
(`environment/sandbox.py`, `environment/host.py`); nothing Docker-side is imported. Every selected trial ends
in exactly one result, built in one place (`trial.record_result`).
"""
