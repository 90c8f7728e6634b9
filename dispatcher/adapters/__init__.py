"""boto3 and nothing else: one module per AWS service or table role, errors translated in one place.

Each adapter takes its boto3 client as an argument.
"""
