"""Every lab notebook runs top to bottom in a fresh kernel, and its self-checks pass."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def test_notebooks_are_committed_without_outputs():
    assert NOTEBOOKS
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, f"{path.name} has outputs"


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes_and_self_checks_pass(path):
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    text = "\n".join(
        str(out.get("text", "")) + str(out.get("data", {}).get("text/plain", "")) + str(out.get("data", {}).get("text/markdown", ""))
        for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs
    )
    assert "❌" not in text, "a self-check failed in the reference answers"
    checks = text.count("✅")
    assert checks >= 4, f"expected the 4 exercise checks to pass, saw {checks}"
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 2, "expected the filmstrip and the window plot"
