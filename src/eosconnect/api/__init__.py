"""The public API for connector authors: import everything from `eosconnect.api`.

The contract only, as Kafka's `connect-api`. Modules, one job each: `records` (records,
partitions/offsets, headers), `source`/`sink` (connector and task base classes), `context` (what the
runtime hands them), `offsets` (reading committed offsets), `transactions` (connector-defined
transaction boundaries), `config` and `validators` (setting definitions), `errors`, the `data`
package (Kafka Connect's data model: `Schema`, `SchemaBuilder`, `Struct`, logical types,
`SchemaProjector`), and the plugin interfaces `converter` (`Converter`), `transforms`
(`Transformation`, `Predicate`) and `config_provider` (`ConfigProvider`). The built-in converters are
in `eosconnect.converters`, the built-in transforms in `eosconnect.transforms`, and finding plugins
by name in `eosconnect.plugins`.
"""

from eosconnect.api import data
from eosconnect.api.batch import ColumnOffsets, SourceBatch
from eosconnect.api.config import (
    NO_DEFAULT,
    ConfigDef,
    ConfigKey,
    ConfigKeyInfo,
    ConfigType,
    ConfigValue,
    Importance,
    Password,
)
from eosconnect.api.config_provider import ConfigProvider
from eosconnect.api.connector import Connector, Task
from eosconnect.api.context import ConnectorContext, SinkTaskContext, SourceTaskContext
from eosconnect.api.converter import Converter
from eosconnect.api.data import *  # noqa: F403 - exported under data.__all__, the one list of them
from eosconnect.api.errors import (
    ConfigException,
    ConnectException,
    ConnectorClassNotFound,
    DataException,
    RetriableException,
    TransactionRequestConflict,
)
from eosconnect.api.metrics import Gauge, Measurable, MetricName, Monitorable, PluginMetrics, Sensor
from eosconnect.api.offsets import InMemoryOffsetStorageReader, OffsetStorageReader
from eosconnect.api.records import (
    ConnectRecord,
    Header,
    Headers,
    HeadersLike,
    HeaderValue,
    OffsetAndMetadata,
    Primitive,
    RecordMetadata,
    SinkRecord,
    SourceOffset,
    SourcePartition,
    SourceRecord,
    TopicPartition,
)
from eosconnect.api.sink import (
    SINK_TOPICS_CONFIG_DEF,
    TOPICS_CONFIG,
    TOPICS_REGEX_CONFIG,
    SinkConnector,
    SinkTask,
    sink_topics,
    sink_topics_errors,
)
from eosconnect.api.source import (
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    ReplaySupport,
    SourceConnector,
    SourceTask,
)
from eosconnect.api.transactions import RequestedTransactionContext, TransactionContext
from eosconnect.api.transforms import Predicate, Transformation
from eosconnect.api.validators import (
    CallableValidator,
    NonEmptyString,
    Range,
    Validator,
    ValidatorLike,
    ValidList,
    ValidRegex,
    ValidString,
)

__all__ = [
    "NO_DEFAULT",
    "SINK_TOPICS_CONFIG_DEF",
    "TOPICS_CONFIG",
    "TOPICS_REGEX_CONFIG",
    "CallableValidator",
    "ColumnOffsets",
    "ConfigDef",
    "ConfigException",
    "ConfigKey",
    "ConfigKeyInfo",
    "ConfigProvider",
    "ConfigType",
    "ConfigValue",
    "ConnectException",
    "ConnectRecord",
    "Connector",
    "ConnectorClassNotFound",
    "ConnectorContext",
    "ConnectorTransactionBoundaries",
    "Converter",
    "DataException",
    "ExactlyOnceSupport",
    "Gauge",
    "Header",
    "HeaderValue",
    "Headers",
    "HeadersLike",
    "Importance",
    "InMemoryOffsetStorageReader",
    "Measurable",
    "MetricName",
    "Monitorable",
    "NonEmptyString",
    "OffsetAndMetadata",
    "OffsetStorageReader",
    "Password",
    "PluginMetrics",
    "Predicate",
    "Primitive",
    "Range",
    "RecordMetadata",
    "ReplaySupport",
    "RequestedTransactionContext",
    "RetriableException",
    "Sensor",
    "SinkConnector",
    "SinkRecord",
    "SinkTask",
    "SinkTaskContext",
    "SourceBatch",
    "SourceConnector",
    "SourceOffset",
    "SourcePartition",
    "SourceRecord",
    "SourceTask",
    "SourceTaskContext",
    "Task",
    "TopicPartition",
    "TransactionContext",
    "TransactionRequestConflict",
    "Transformation",
    "ValidList",
    "ValidRegex",
    "ValidString",
    "Validator",
    "ValidatorLike",
    "sink_topics",
    "sink_topics_errors",
]
__all__ += data.__all__  # the data model: its own package keeps the list
