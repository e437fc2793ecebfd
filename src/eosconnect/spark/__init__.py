"""Spark-native pipelines: an exactly-once Kafka sink and connectors as streaming sources.

`register(spark)` makes two formats available to a SparkSession (docs/spark.md):

* `eosconnect-kafka`: `df.writeStream.format("eosconnect-kafka")` (and `df.write` with a `job.id`)
  writes each (micro-batch, Spark partition) in one Kafka transaction, exactly once;
* `eosconnect`: `spark.readStream.format("eosconnect").option("connector.class", ...)` runs a
  replayable source connector as a streaming source whose offsets live in Spark's checkpoint.
"""

from __future__ import annotations

from typing import Any

from eosconnect.api.errors import ConfigException
from eosconnect.spark.quiet_stop import stop_at_exit, stop_query

__all__ = ["check_preconditions", "register", "stop_query"]


def check_preconditions(spark: Any) -> None:
    """Raise when the session breaks the sink's preconditions (docs/spark.md, "Preconditions").

    Speculative execution runs a second copy of a task while the first still runs; both use the
    partition's transactional id and fence each other, so it is refused rather than tolerated.
    """
    speculation = str(spark.sparkContext.getConf().get("spark.speculation", "false")).strip().lower()
    if speculation == "true":
        raise ConfigException.for_field(
            "spark.speculation",
            "is true; eosconnect-kafka needs it off (two copies of a task would fence each other's "
            "transactions). Start the session with .config('spark.speculation', 'false').",
        )


def register(spark: Any) -> None:
    """Register `eosconnect-kafka` and `eosconnect` with `spark` after checking its settings: in
    local mode Spark's Python workers run the driver's interpreter unless PYSPARK_PYTHON says
    otherwise, on a cluster the executors must import eosconnect (spark/interpreter.py)."""
    from eosconnect.spark.interpreter import use_driver_python
    from eosconnect.spark.sink import EosKafkaSink
    from eosconnect.spark.source import ConnectorSource

    check_preconditions(spark)
    use_driver_python(spark)  # before registering: each registration records the interpreter
    spark.dataSource.register(EosKafkaSink)
    spark.dataSource.register(ConnectorSource)
    stop_at_exit(spark)  # no EOFError traceback from PySpark when a script ends without spark.stop()
