"""The `mpk` dialect: a persistent megakernel's task graph (issue #32, seed 003).

`ops.py` holds the ops (`mpk.task_graph`, `mpk.task`, `mpk.event`), `verify.py` the graph
rules their verifier enforces (acyclic, trigger counts, every tile read covered by an event).
"""

from mirage_xdsl.dialects.mpk.ops import *  # noqa: F403
