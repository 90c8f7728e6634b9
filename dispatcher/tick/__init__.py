"""The tick service: one invocation's work, in parts, over Protocol ports.

``service`` runs ticks under the lease; ``count`` counts RUNNING; ``round`` and ``starts``
admit one round of messages; ``report`` says what happened. The ports (``ports``) are
boto3 adapters in the Lambda and an in-memory AWS in tests and the full-scale benchmark.
"""
