"""The pure core: the message contract, events, admission, counting, control and re-run planning.

No I/O, no clock, no threads: everything here is tested without AWS.
"""
