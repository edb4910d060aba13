"""The reference duplex agent: a real local voice agent used as the default system under test.

Text-level business core (no audio): ``policy`` (``careful`` / ``naive`` and one switch per
failure mode), ``db`` (``ClinicDB``: Riverside Dental's appointment book in SQLite, idempotent
writes, compensation, the ``final-state.json`` / ``tool-audit.json`` exports) and
``dialogue`` (``DialogueManager``: rule-based understanding of ASR text, tasks with versions,
background tool calls, stop, stale results, history truncation).
"""
