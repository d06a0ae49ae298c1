"""Command handlers, one module per area, beside the connection shell.

``session`` is what a handler may use of its connection; ``lookup``,
``produce``, ``consume`` and ``schema`` answer the commands of their area.
New areas (the cluster's lookups and topic moves, authentication exchanges)
get a module here and a line in the connection's routing table.
"""
