"""The package's layering (docs/architecture.md, docs/architecture.md), checked on the source.

Lower layers must not import higher ones, not even lazily inside a function: storage/ (Kafka-backed
state, client primitives) knows nothing of the task loops (runtime/) or the herder (cluster/), and
runtime/ (what runs inside Spark tasks) knows nothing of the herder or the REST layer. The worker's
settings (worker_config.py) sit below all of them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "eosconnect"

#: layer -> the top-level parts of eosconnect it must not import.
FORBIDDEN = {
    "worker_config": {"storage", "runtime", "cluster", "rest", "connectors", "spark", "mirrormaker", "tools"},
    "api": {"runtime", "cluster", "rest", "connectors", "spark", "tools", "clients", "cli"},
    "storage": {
        "runtime",
        "cluster",
        "rest",
        "connectors",
        "spark",
        "mirrormaker",
        "tools",
        "clients",
        "cli",
    },
    "runtime": {"cluster", "rest", "connectors", "spark", "mirrormaker", "tools", "clients", "cli"},
    "cluster": {"rest", "spark", "mirrormaker", "tools", "clients", "cli", "distributed"},
}


def eosconnect_imports(source: str) -> set[str]:
    """The top-level parts of eosconnect that `source` imports, anywhere in it (functions included)."""
    parts = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        parts |= {name.split(".")[1] for name in names if name.startswith("eosconnect.")}
    return parts


def test_the_scanner_sees_lazy_and_plain_imports() -> None:
    source = (
        "import eosconnect.rest.app\n"
        "from eosconnect.storage.clients import client_config\n"
        "def f():\n    from eosconnect.cluster.herder import DistributedHerder\n"
    )
    assert eosconnect_imports(source) == {"rest", "storage", "cluster"}


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_lower_layers_do_not_import_higher_ones(layer: str) -> None:
    path = PACKAGE / layer
    files = sorted(path.rglob("*.py")) if path.is_dir() else [path.with_suffix(".py")]
    assert files and all(f.exists() for f in files), f"layer {layer} not found under {PACKAGE}"
    wrong = {
        str(f.relative_to(PACKAGE)): sorted(eosconnect_imports(f.read_text()) & FORBIDDEN[layer])
        for f in files
    }
    assert not {f: parts for f, parts in wrong.items() if parts}, (
        f"{layer} imports higher layers (see docs/architecture.md)"
    )
