"""Self-checks for the lab notebooks: each says what is wrong, not just False. What every lab's checks share is
here (:mod:`~milvus_edu.labs.feedback`); each lesson's checks are in its own folder
(``milvus_edu/mechanisms/<lesson>/labs.py``). Where a lab writes its files: :func:`scratch_folder`, a folder that
goes when the notebook's kernel stops (:mod:`~milvus_edu.labs.scratch`)."""

from .scratch import scratch_folder

__all__ = ["scratch_folder"]
