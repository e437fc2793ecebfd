"""eosconnect: Kafka Connect-style connectors on Apache Spark, exactly once into Apache Kafka."""

__version__ = "0.1.0"
