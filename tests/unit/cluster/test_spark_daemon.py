"""The daemon moves Spark's pyspark.zip behind an installed pyspark of the same version only."""

from __future__ import annotations

import zipfile
from pathlib import Path

from eosconnect.cluster.spark_daemon import prefer_installed_pyspark


def _zipped_pyspark(directory: Path, version: str) -> str:
    archive = directory / "lib" / "pyspark.zip"
    archive.parent.mkdir(parents=True)
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("pyspark/version.py", f"__version__: str = '{version}'\n")
    return str(archive)


def _installed_pyspark(directory: Path, version: str) -> str:
    (directory / "pyspark").mkdir(parents=True)
    (directory / "pyspark" / "version.py").write_text(f"__version__: str = '{version}'\n")
    return str(directory)


def test_the_zip_moves_behind_the_same_installed_version(tmp_path: Path) -> None:
    zipped = _zipped_pyspark(tmp_path / "spark", "4.3.0")
    site = _installed_pyspark(tmp_path / "site", "4.3.0")
    path = ["", zipped, "/plugins.zip", site]
    assert prefer_installed_pyspark(path)
    assert path == ["", "/plugins.zip", site, zipped]


def test_a_different_installed_version_leaves_the_zip_first(tmp_path: Path) -> None:
    zipped = _zipped_pyspark(tmp_path / "spark", "4.3.0")
    site = _installed_pyspark(tmp_path / "site", "4.2.1")
    path = [zipped, site]
    assert not prefer_installed_pyspark(path)
    assert path == [zipped, site]


def test_nothing_to_do_without_a_zip_or_without_an_installed_pyspark(tmp_path: Path) -> None:
    site = _installed_pyspark(tmp_path / "site", "4.3.0")
    assert not prefer_installed_pyspark([site])
    zipped = _zipped_pyspark(tmp_path / "spark", "4.3.0")
    path = [zipped, str(tmp_path / "empty")]
    assert not prefer_installed_pyspark(path)
    assert path == [zipped, str(tmp_path / "empty")]
