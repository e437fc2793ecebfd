"""What the worker ships to Spark executors, and the addresses it advertises (no Spark, no Kafka)."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from eosconnect.cluster.shipping import (
    ARCHIVE_ALIAS,
    ShippingError,
    _excluded,
    pack_plugins,
    plan_shipping,
    plugin_fingerprint,
)
from eosconnect.cluster.spark import session_settings
from eosconnect.launch import advertised_url, driver_address_settings
from eosconnect.plugins.loading import PLUGIN_PATH_ENV, check_plugin_location
from eosconnect.runtime.host import cache_root
from eosconnect.worker_config import WorkerConfig


@pytest.fixture
def plugins(tmp_path: Path) -> Path:
    directory = tmp_path / "plugins"
    (directory / "pkg").mkdir(parents=True)
    (directory / "mod.py").write_text("X = 1\n")
    (directory / "pkg" / "__init__.py").write_text("")
    (directory / "pkg" / "__pycache__").mkdir()
    (directory / "pkg" / "__pycache__" / "junk.pyc").write_bytes(b"junk")
    return directory


def test_local_master_ships_nothing_and_keeps_the_users_python(tmp_path: Path, plugins: Path) -> None:
    plan = plan_shipping("local[4,2]", {}, [str(plugins)], tmp_path)
    assert plan.conf == {} and plan.py_files == [] and plan.environment is None
    assert (
        plan_shipping("local[2]", {"spark.pyspark.python": "/opt/py"}, [], tmp_path).executor_python
        == "/opt/py"
    )


@pytest.mark.parametrize(
    "setting",
    ["spark.archives", "spark.pyspark.python", "spark.kubernetes.container.image"],
)
def test_user_provided_python_is_honoured(tmp_path: Path, plugins: Path, setting: str) -> None:
    conf = {setting: "/given/python" if setting == "spark.pyspark.python" else "something"}
    plan = plan_shipping("spark://m:7077", conf, [str(plugins)], tmp_path)
    assert len(plan.py_files) == 1  # plugin code still ships
    assert plan.environment is None
    assert plan.conf == {f"spark.executorEnv.{PLUGIN_PATH_ENV}": plan.py_files[0].name}
    settings = session_settings("spark://m:7077", conf, plan)
    assert settings[setting] == conf[setting]
    if setting == "spark.pyspark.python":
        assert plan.executor_python == "/given/python"


def test_cluster_master_ships_the_packed_environment(tmp_path: Path) -> None:
    if sys.prefix == sys.base_prefix:
        with pytest.raises(ShippingError, match=r"spark\.archives"):
            plan_shipping("spark://m:7077", {}, [], tmp_path)
        return
    cache = cache_root()  # the worker's cache: packed once per content, shared with the cluster tests
    plan = plan_shipping("spark://m:7077", {}, [], cache)
    assert plan.environment is not None
    assert plan.conf["spark.archives"].endswith(f"#{ARCHIVE_ALIAS}")
    assert plan.executor_python == f"./{ARCHIVE_ALIAS}/bin/python"
    again = plan_shipping("spark://m:7077", {}, [], cache)  # cached by content: not packed twice
    assert again.environment == plan.environment
    with tarfile.open(plan.environment.archive) as tar:
        names = tar.getnames()
    assert "pyvenv.cfg" in names and "bin/python" in names
    assert any(n.endswith("site-packages/eosconnect/cluster/shipping.py") for n in names)
    assert any("site-packages/confluent_kafka/" in n for n in names)
    left_out = ("pyspark/jars/", "/pip/", "/pyarrow/")
    assert not any(part in n for n in names for part in left_out)
    # Byte code ships for what the Python daemon imports, and only for that.
    compiled = {n for n in names if n.endswith(".pyc")}
    tag = sys.implementation.cache_tag
    for module in ("eosconnect/runtime/exactly_once", "pyspark/worker", "confluent_kafka/__init__"):
        directory, stem = module.rsplit("/", 1)
        assert any(n.endswith(f"site-packages/{directory}/__pycache__/{stem}.{tag}.pyc") for n in compiled)
    assert not any("site-packages/sqlalchemy/" in n for n in compiled)  # only the JDBC connector's


def test_excluded_entries() -> None:
    assert _excluded(Path("pyspark/jars/spark-core.jar"))
    assert _excluded(Path("__editable__.eosconnect-0.1.0.pth"))
    assert _excluded(Path("eosconnect/__init__.py"))  # added from where it is imported instead
    assert _excluded(Path("pytest-8.0.dist-info/METADATA"))
    assert _excluded(Path("pyarrow/lib.so"))  # only the DataFrame data sources use it
    assert not _excluded(Path("eosconnect-0.1.0.dist-info/METADATA"))  # entry points stay
    assert not _excluded(Path("pyspark/worker.py"))
    assert not _excluded(Path("py4j/java_gateway.py"))


def test_plugin_directories_ship_as_zips_by_content(tmp_path: Path, plugins: Path) -> None:
    first = pack_plugins([str(plugins)], tmp_path / "cache")
    assert len(first) == 1
    with zipfile.ZipFile(first[0]) as zf:
        assert sorted(zf.namelist()) == ["mod.py", "pkg/__init__.py"]
    assert pack_plugins([str(plugins)], tmp_path / "cache") == first
    before = plugin_fingerprint([str(plugins)])
    (plugins / "mod.py").write_text("X = 2\n")
    assert plugin_fingerprint([str(plugins)]) != before
    assert pack_plugins([str(plugins)], tmp_path / "cache") != first
    wheel = tmp_path / "thing-1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK")
    assert pack_plugins([str(wheel)], tmp_path / "cache") == [wheel]
    with pytest.raises(ShippingError, match=r"plugin\.path"):
        pack_plugins([str(tmp_path / "missing")], tmp_path / "cache")


def test_plugin_path_is_a_worker_setting() -> None:
    worker = WorkerConfig.parse({"bootstrap.servers": "k:9092", "plugin.path": "/a/plugins, /b/x.zip"})
    assert worker.plugin_path == ("/a/plugins", "/b/x.zip")
    assert WorkerConfig.parse({"bootstrap.servers": "k:9092"}).plugin_path == ()


def test_wildcard_listener_advertises_the_host_name() -> None:
    assert advertised_url({}, "http", "0.0.0.0", 8083) == f"http://{socket.gethostname()}:8083"
    assert advertised_url({}, "http", "10.1.2.3", 8083) == "http://10.1.2.3:8083"
    given = {
        "rest.advertised.host.name": "w1.example.com",
        "rest.advertised.port": "443",
        "rest.advertised.listener": "https",
    }
    assert advertised_url(given, "http", "0.0.0.0", 8083) == "https://w1.example.com:443"


def test_the_driver_binds_where_the_rest_api_binds() -> None:
    assert driver_address_settings({}, "127.0.0.1") == {
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
    }
    assert driver_address_settings({}, "0.0.0.0") == {
        "spark.driver.bindAddress": "0.0.0.0",
        "spark.driver.host": socket.gethostname(),
    }
    user = {"spark.driver.host": "d.example.com", "spark.driver.bindAddress": "10.0.0.1"}
    assert driver_address_settings(user, "0.0.0.0") == {}


def test_shipped_plugins_are_a_plugin_path_on_the_executors(
    tmp_path: Path, plugins: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On an executor the zip added with addPyFile sits in the Python worker's current directory and
    is on sys.path as a relative entry; the executors' plugin.path names it, so the class-loading
    rule lets its classes load, and nothing else beside it."""
    plan = plan_shipping(
        "spark://m:7077", {"spark.submit.pyFiles": "/opt/extra.zip"}, [str(plugins)], tmp_path
    )
    setting = plan.conf[f"spark.executorEnv.{PLUGIN_PATH_ENV}"]
    assert setting.split(os.pathsep) == ["extra.zip", plan.py_files[0].name]

    executor_dir = tmp_path / "executor"
    executor_dir.mkdir()
    shutil.copy(plan.py_files[0], executor_dir)
    (executor_dir / "stray.py").write_text("Y = 2\n")
    monkeypatch.chdir(executor_dir)
    monkeypatch.setattr(sys, "path", [f"./{plan.py_files[0].name}", ".", *sys.path])
    monkeypatch.setenv("PYTHONPATH", "")
    monkeypatch.delenv(PLUGIN_PATH_ENV, raising=False)
    for name in ("mod", "stray"):
        sys.modules.pop(name, None)
    with pytest.raises(ImportError, match="is not a plugin"):
        check_plugin_location("mod")  # without the executors' plugin.path: refused
    monkeypatch.setenv(PLUGIN_PATH_ENV, setting)
    check_plugin_location("mod")
    with pytest.raises(ImportError, match="is not a plugin"):
        check_plugin_location("stray")


def test_prune_removes_only_unused_environments_beyond_the_newest_other(tmp_path: Path) -> None:
    import fcntl
    import os

    from eosconnect.cluster.shipping import prune_packed_environments

    root = tmp_path / "shipped-env"
    for name in ["current", "previous", "served", "old", "older"]:
        (root / name).mkdir(parents=True)
        (root / name / "eosconnect-env.tar.gz").write_bytes(b"x")
        (root / name / "in-use").touch()
    served = (root / "served" / "in-use").open("a")  # another worker serves this one (older)
    fcntl.flock(served, fcntl.LOCK_SH)
    for age, name in enumerate(["current", "previous", "served", "old", "older"]):
        os.utime(root / name / "in-use", (1_000_000 - age * 100, 1_000_000 - age * 100))
    try:
        removed = prune_packed_environments(root, keep="current")
    finally:
        served.close()
    assert sorted(p.name for p in removed) == ["old", "older"]
    assert sorted(p.name for p in root.iterdir()) == ["current", "previous", "served"]


def test_prune_skips_an_environment_another_worker_removes_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers starting together both prune: a directory one of them lists may be gone by the
    time it locks it, which is no reason for the worker to fail its start."""
    import os
    import shutil

    from eosconnect.cluster import shipping

    root = tmp_path / "shipped-env"
    for age, name in enumerate(["current", "previous", "vanishing"]):
        (root / name).mkdir(parents=True)
        (root / name / "in-use").touch()
        os.utime(root / name / "in-use", (1_000_000 - age * 100, 1_000_000 - age * 100))
    last_used = shipping._last_used

    def removed_by_another_worker(directory: Path) -> float:
        used = last_used(directory)
        if directory.name == "vanishing":
            shutil.rmtree(directory)
        return used

    monkeypatch.setattr(shipping, "_last_used", removed_by_another_worker)
    assert shipping.prune_packed_environments(root, keep="current") == []
    assert sorted(p.name for p in root.iterdir()) == ["current", "previous"]
