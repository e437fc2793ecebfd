"""The package's layering (src/eosconnect/layers.py, shown in docs/architecture.md), checked on the source.

Every module's imports of eosconnect, anywhere in it (functions included), must be allowed by its
part's row of `LAYERS`; every part has a row; the table has no cycle; and the page shows the table.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from eosconnect.layers import LAYERS, markdown_table

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "eosconnect"
DOCS = PACKAGE.parents[1] / "docs" / "architecture.md"


def eosconnect_imports(source: str) -> set[str]:
    """The parts of eosconnect that `source` imports, anywhere in it (functions included).

    `from eosconnect import x` names the package root (`__init__`) unless `x` is a part itself."""
    parts = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "eosconnect":
                parts |= {a.name if a.name in LAYERS else "__init__" for a in node.names}
                continue
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        parts |= {name.split(".")[1] for name in names if name.startswith("eosconnect.")}
    return parts


def part_of(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def modules() -> Iterator[Path]:
    yield from sorted(PACKAGE.rglob("*.py"))


def test_the_scanner_sees_lazy_and_plain_imports() -> None:
    source = (
        "import eosconnect.rest.app\n"
        "from eosconnect.storage.clients import client_config\n"
        "from eosconnect import __version__\n"
        "def f():\n    from eosconnect.cluster.herder import DistributedHerder\n"
    )
    assert eosconnect_imports(source) == {"rest", "storage", "cluster", "__init__"}


def test_every_part_has_a_row() -> None:
    parts = {part_of(path) for path in modules()}
    assert parts - set(LAYERS) == set(), "add the new part to LAYERS in src/eosconnect/layers.py"
    assert set(LAYERS) - parts == set(), "LAYERS names parts that do not exist"


def test_the_table_has_no_cycle() -> None:
    """Each part may import only parts listed above it in LAYERS: the order is the layering."""
    seen: set[str] = set()
    for part, layer in LAYERS.items():
        assert layer.imports <= seen, f"{part} may import {sorted(layer.imports - seen)}, listed after it"
        seen.add(part)


@pytest.mark.parametrize("part", sorted(LAYERS))
def test_every_import_follows_the_table(part: str) -> None:
    allowed = LAYERS[part].imports | {part}
    files = [path for path in modules() if part_of(path) == part]
    assert files, f"part {part} not found under {PACKAGE}"
    wrong = {str(f.relative_to(PACKAGE)): sorted(eosconnect_imports(f.read_text()) - allowed) for f in files}
    assert not {f: parts for f, parts in wrong.items() if parts}, (
        f"{part} imports parts its row of src/eosconnect/layers.py does not allow"
    )


def test_the_architecture_page_shows_the_table() -> None:
    assert markdown_table() in DOCS.read_text(), (
        "docs/architecture.md differs from src/eosconnect/layers.py: run python -m eosconnect.layers"
    )
