"""A real Milvus beside the model: start a PyPI ``milvus`` server, run a workload on it, and read its logs into
a run log (:mod:`milvus_edu.real.logs`) that the stepper, ``levels.reads`` and the analyses open like a simulated run."""
