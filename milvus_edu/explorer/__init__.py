"""The explorer: the whole simulated cluster on one cursor (:func:`explore`, :class:`Explorer`).

A space-time diagram of every component and pchannel with the messages between them, the watermark lanes of every
mechanism, the requests, a state panel, jumps to violations and stalls, filters, the causal past of an event, "Why?"
chains and forks, in one JupyterLab widget that steps in the browser. Built only from the run log and the
mechanisms' trace declarations; it names no mechanism, except where "Why?" picks its question at the cursor (a read
by its ``request`` number, a ``client.flush`` by its place among the client flushes, as :func:`milvus_edu.why`
counts them).
"""

from .explorer import FORK_ACTIONS, Explorer, explore
from .payload import Payload, build_payload, causal_past

__all__ = ["Explorer", "explore", "FORK_ACTIONS", "Payload", "build_payload", "causal_past"]
