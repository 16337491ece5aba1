"""The built-in mechanisms, each registering itself with :mod:`milvus_edu.registry` on import.

``import milvus_edu`` imports this package, so every built-in mechanism is registered before any
run, view or analysis asks the registry. Each mechanism is a subpackage whose ``__init__`` builds
one :class:`~milvus_edu.registry.Mechanism`; the order here is the order of the lessons.
"""

from . import tso  # noqa: F401  (lesson 1 registers itself)
from . import timetick  # noqa: F401,I001  (lesson 2, after the TSO)
from . import flush  # noqa: F401,I001  (lesson 3, after TimeTick)
from . import query  # noqa: F401,I001  (lesson 4, after flush)
