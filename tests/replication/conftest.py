"""Makes the ``proof`` package (checker, replica comparison, workload, network namespaces)
importable by the tests of this folder (pytest runs with ``--import-mode=importlib``)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
