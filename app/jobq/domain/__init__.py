"""Queue vocabulary shared by every layer: statuses, settings defaults, errors, retry policy.

Imports nothing else from ``app``.
"""
