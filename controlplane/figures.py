"""Figures as the control planes read them.

The largest integer the databases store (signed 64-bit) bounds every count.
"""

# The largest integer the databases store (signed 64-bit).
MAX_DB_INT = 2**63 - 1
